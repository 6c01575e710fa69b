import { type Admin, type EachBatchPayload, type SASLOptions, type ICustomPartitioner, type Consumer as KafkaConsumer, Kafka, type KafkaMessage, type Producer, Partitioners, logLevel } from 'kafkajs';
import type { Logger } from 'pino';
import {
  type ConsumeOptions,
  type Consumer,
  type DeliveredMessage,
  type MessageHandler,
  type MessageLog,
  type OutgoingMessage,
  type TopicSpec,
  handlerRetryDelay,
} from './message-log.js';
import { type KafkaSecurity, describeKafkaSecurity } from '../platform/connection-security.js';
import { quietKafkajsNegativeTimeouts } from './kafkajs-timer-warning.js';
import { partitionKey } from './partition-key.js';
import { PartitionWindow } from './partition-window.js';

export interface KafkaSettings {
  /** host:port of one or more brokers. */
  readonly brokers: readonly string[];
  readonly clientId: string;
  /** How long the group waits for a silent member before handing its partitions to others. */
  readonly sessionTimeoutMs: number;
  /** TLS and SASL to the brokers; plaintext without either. */
  readonly security?: KafkaSecurity;
}

const LEVELS: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

// kafkajs retries each request this often before giving up on it; the adapter retries above that
// (producers through their callers, consumers by restarting), so a broker that is away for a
// while is waited for rather than treated as fatal.
const RETRY = { retries: 8, initialRetryTime: 300, maxRetryTime: 5_000 };
const PUBLISH_SLICE = 200;

/** The message log on Apache Kafka, through kafkajs. */
export class KafkaMessageLog implements MessageLog {
  readonly kind = 'kafka';
  readonly description: string;
  private readonly kafka: Kafka;
  private producer: Promise<Producer> | undefined;
  private readonly consumers = new Set<KafkaGroupMember>();

  constructor(
    private readonly settings: KafkaSettings,
    private readonly log: Pick<Logger, 'error' | 'warn' | 'info' | 'debug'>,
  ) {
    this.description = `kafka ${settings.brokers.join(',')}${describeKafkaSecurity(settings.security)}`;
    quietKafkajsNegativeTimeouts();
    const { tls, sasl } = settings.security ?? {};
    this.kafka = new Kafka({
      clientId: settings.clientId,
      brokers: [...settings.brokers],
      // The brokers' certificates are always verified: against KAFKA_SSL_CA_FILE, or the CAs Node trusts.
      ...(tls ? { ssl: { rejectUnauthorized: true, ...tls } } : {}),
      ...(sasl ? { sasl: { mechanism: sasl.mechanism, username: sasl.username, password: sasl.password } as SASLOptions } : {}),
      retry: RETRY,
      connectionTimeout: 3_000,
      logLevel: logLevel.WARN,
      logCreator:
        () =>
        ({ level, log: { message, ...extra } }) => {
          const method = LEVELS[level] ?? 'info';
          this.log[method]({ kafka: extra }, `kafka: ${message}`);
        },
    });
  }

  async ensureTopics(topics: readonly TopicSpec[]): Promise<void> {
    const admin: Admin = this.kafka.admin({ retry: RETRY });
    await admin.connect();
    try {
      const existing = new Set(await admin.listTopics());
      const missing = topics.filter((spec) => !existing.has(spec.topic));
      if (missing.length === 0) return;
      // Another process may create the same topics at the same moment: that is not an error.
      await admin.createTopics({ waitForLeaders: true, topics: missing.map((spec) => ({ topic: spec.topic, numPartitions: spec.partitions })) });
    } finally {
      await admin.disconnect();
    }
  }

  private connectedProducer(): Promise<Producer> {
    this.producer ??= (async () => {
      // One request in flight: a retried send can never overtake a later one, so order per key holds.
      const producer = this.kafka.producer({ createPartitioner: spreadingPartitioner, retry: RETRY, allowAutoTopicCreation: true, maxInFlightRequests: 1 });
      try {
        await producer.connect();
      } catch (error) {
        this.producer = undefined;
        throw error;
      }
      return producer;
    })();
    return this.producer;
  }

  async publish(topic: string, messages: readonly OutgoingMessage[]): Promise<void> {
    if (messages.length === 0) return;
    const producer = await this.connectedProducer();
    // In slices, so that one request stays well under the broker's message size limit.
    for (let start = 0; start < messages.length; start += PUBLISH_SLICE) {
      await producer.send({
        topic,
        acks: -1,
        messages: messages
          .slice(start, start + PUBLISH_SLICE)
          .map((message) => ({ key: message.key, value: message.value, headers: { ...message.headers, ...(message.spread !== undefined ? { [SPREAD_HEADER]: String(message.spread) } : {}) } })),
      });
    }
  }

  async consume(options: ConsumeOptions, handler: MessageHandler): Promise<Consumer> {
    const member = new KafkaGroupMember(this.kafka, this.settings, options, handler, this.log, () => this.consumers.delete(member));
    this.consumers.add(member);
    try {
      await member.start();
    } catch (error) {
      await member.stop().catch(() => undefined);
      throw error;
    }
    return member;
  }

  async close(): Promise<void> {
    await Promise.all([...this.consumers].map((consumer) => consumer.stop()));
    const producer = this.producer;
    this.producer = undefined;
    if (producer) await (await producer.catch(() => undefined))?.disconnect();
  }
}

const SPREAD_HEADER = 'spool-spread';

/** Kafka's own partitioner (murmur2 of the key), except for messages that ask to be spread. */
const spreadingPartitioner: ICustomPartitioner = () => {
  const byKey = Partitioners.DefaultPartitioner();
  return (args) => {
    const spread = args.message.headers?.[SPREAD_HEADER];
    return spread === undefined ? byKey(args) : Number(spread.toString()) % args.partitionMetadata.length;
  };
};

function delivered(topic: string, partition: number, message: KafkaMessage): DeliveredMessage {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.map(String).join(',') : value.toString();
  }
  return { topic, partition, offset: message.offset, key: message.key?.toString() ?? '', value: message.value?.toString() ?? '', headers };
}

/** A partition this member holds messages of, across the batches kafkajs fetches for it. */
interface HeldPartition {
  readonly topic: string;
  readonly partition: number;
  readonly window: PartitionWindow;
  /** Taken from this member by a rebalance: nothing more is started or committed for it. */
  revoked: boolean;
}

class KafkaGroupMember implements Consumer {
  private consumer: KafkaConsumer | undefined;
  private readonly held = new Map<string, HeldPartition>();
  /** Handlers running (with the commit that follows them): a graceful stop waits for them. */
  private readonly handlers = new Set<Promise<void>>();
  private readonly batches = new Set<Promise<void>>();
  private memberId: string | undefined;
  /** The partitions the latest join gave this member, by topic. */
  private assignment: Readonly<Record<string, readonly number[]>> = {};
  /** kafkajs's heartbeat, taken from the latest batch: it stays valid once the batch returned. */
  private heartbeat: (() => Promise<void>) | undefined;
  /** The last heartbeat failed (a rebalance, mostly): a batch waiting for room hands it to kafkajs. */
  private heartbeatFailure: { readonly error: unknown } | undefined;
  private beating: NodeJS.Timeout | undefined;
  private stopping = false;
  private abandoned = false;
  private abandonNow: () => void = () => undefined;
  private readonly abandonment = new Promise<void>((resolve) => {
    this.abandonNow = resolve;
  });

  constructor(
    private readonly kafka: Kafka,
    private readonly settings: KafkaSettings,
    private readonly options: ConsumeOptions,
    private readonly handler: MessageHandler,
    private readonly log: Pick<Logger, 'error' | 'warn' | 'info'>,
    private readonly forget: () => void,
  ) {}

  async start(): Promise<void> {
    // A new consumer is a new member: what the previous one held is no longer this member's.
    this.revoke(() => true);
    this.memberId = undefined;
    this.heartbeat = undefined;
    const heartbeatInterval = Math.max(500, Math.floor(this.settings.sessionTimeoutMs / 10));
    const consumer = this.kafka.consumer({
      groupId: this.options.groupId,
      sessionTimeout: this.settings.sessionTimeoutMs,
      heartbeatInterval,
      rebalanceTimeout: Math.max(60_000, this.settings.sessionTimeoutMs * 2),
      retry: { ...RETRY, restartOnFailure: async () => !this.stopping && !this.abandoned },
    });
    this.consumer = consumer;
    // kafkajs heartbeats between fetches only; handlers outlive the batch that handed them their
    // message, so the member beats while any of them runs (kafkajs sends at most one beat per
    // interval, however often it is asked).
    this.beating ??= setInterval(() => {
      if (this.handlers.size === 0 || !this.heartbeat) return;
      this.heartbeat().then(
        () => (this.heartbeatFailure = undefined),
        (error: unknown) => {
          this.heartbeatFailure = { error };
          for (const held of this.held.values()) held.window.wake();
        },
      );
    }, heartbeatInterval);
    // Each join says which partitions this member now holds. kafkajs fetches a partition it kept
    // from its committed offset again; the messages held already are not handed a second time.
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      const sameMember = payload.memberId === this.memberId;
      this.memberId = payload.memberId;
      this.assignment = payload.memberAssignment;
      this.heartbeatFailure = undefined;
      this.revoke((held) => !sameMember || !(payload.memberAssignment[held.topic] ?? []).includes(held.partition));
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [...this.options.topics], fromBeginning: this.options.startAt !== 'latest' });
    await consumer.run({
      // kafkajs commits nothing by itself with autoCommit off (not on a rebalance, a stop or an
      // error): the member commits each partition's finished prefix, and what it resolves only
      // moves kafkajs's fetch position past the messages it holds.
      autoCommit: false,
      partitionsConsumedConcurrently: this.options.concurrency ?? 1,
      eachBatchAutoResolve: false,
      eachBatch: async (payload) => {
        const work = this.handleBatch(payload);
        this.batches.add(work);
        try {
          await work;
        } finally {
          this.batches.delete(work);
        }
      },
    });
    // kafkajs restarts a consumer after most failures by itself; one it gives up on is started
    // again here, so that a processor never sits idle while it still answers its probes.
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      if (payload.restart || this.stopping || this.abandoned) return;
      this.log.error({ err: payload.error, group: this.options.groupId }, 'consumer crashed; joining the group again');
      setTimeout(() => {
        if (this.stopping || this.abandoned) return;
        void consumer
          .disconnect()
          .catch(() => undefined)
          .then(() => this.start())
          .catch((error: unknown) => this.log.error({ err: error, group: this.options.groupId }, 'could not join the group again'));
      }, 1_000).unref();
    });
  }

  partitionsHeld(topic: string): readonly number[] {
    return this.assignment[topic] ?? [];
  }

  private revoke(taken: (held: HeldPartition) => boolean): void {
    for (const [key, held] of this.held) {
      if (!taken(held)) continue;
      held.revoked = true;
      held.window.wake();
      this.held.delete(key);
    }
  }

  private heldPartition(topic: string, partition: number): HeldPartition {
    const key = partitionKey(topic, partition);
    let held = this.held.get(key);
    if (!held) {
      held = { topic, partition, window: new PartitionWindow(), revoked: false };
      this.held.set(key, held);
    }
    return held;
  }

  /**
   * Hands the fetched messages of one partition to the handler, waiting only while the partition
   * already holds `prefetch` unfinished ones. A handed message's offset is resolved at once, so
   * kafkajs fetches what follows it while it runs; what is committed is the finished prefix
   * (`finished`). Messages not handed (the member stops, the partition was revoked) stay
   * unresolved and are fetched again.
   */
  private async handleBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    this.heartbeat = heartbeat;
    const { topic, partition, messages } = batch;
    const prefetch = Math.max(1, this.options.prefetch ?? 1);
    const held = this.heldPartition(topic, partition);
    const mayStart = () => !this.stopping && !this.abandoned && !held.revoked && isRunning() && !isStale();
    for (const message of messages) {
      const offset = BigInt(message.offset);
      if (!held.window.handed(offset)) {
        while (held.window.unfinished >= prefetch && mayStart() && !this.heartbeatFailure) await held.window.changed();
        // As one message at a time did: kafkajs rejoins the group on a rebalance error, while
        // the handlers running go on.
        if (this.heartbeatFailure && mayStart() && held.window.unfinished >= prefetch) throw this.heartbeatFailure.error;
        if (!mayStart()) return;
        held.window.hand(offset);
        this.track(this.handle(delivered(topic, partition, message)).then((handled) => (handled ? this.finished(held, offset) : undefined)));
      }
      resolveOffset(message.offset);
    }
  }

  private track(work: Promise<void>): void {
    this.handlers.add(work);
    void work.finally(() => this.handlers.delete(work));
  }

  private async finished(held: HeldPartition, offset: bigint): Promise<void> {
    if (this.abandoned || held.revoked) return;
    if (held.window.finish(offset)) await this.commit(held);
  }

  /** Commits the partition's finished prefix, after the commits before it. */
  private commit(held: HeldPartition): Promise<void> {
    return held.window.commit(async (offset) => {
      if (this.abandoned || held.revoked) return false;
      try {
        await this.consumer!.commitOffsets([{ topic: held.topic, partition: held.partition, offset: offset.toString() }]);
        return true;
      } catch (error) {
        // The partition moved to another member meanwhile: it will handle the messages again,
        // and handlers are idempotent.
        this.log.warn({ err: error, topic: held.topic, partition: held.partition, offset: offset.toString() }, 'offset not committed; messages will be delivered again');
        return false;
      }
    });
  }

  /** Runs the handler until it succeeds; false if the member left meanwhile. */
  private async handle(message: DeliveredMessage): Promise<boolean> {
    let failures = 0;
    for (;;) {
      try {
        const outcome = await Promise.race([this.handler(message).then(() => 'done' as const), this.abandonment.then(() => 'abandoned' as const)]);
        return outcome === 'done';
      } catch (error) {
        this.options.onError?.(error, message);
        if (this.stopping || this.abandoned) return false;
        await new Promise((resolve) => setTimeout(resolve, handlerRetryDelay(this.options, ++failures)));
        if (this.stopping || this.abandoned) return false;
      }
    }
  }

  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.forget();
    // Commits only count while the consumer runs: take nothing new, let what is running finish
    // and commit, then leave the group.
    try {
      this.consumer?.pause(this.options.topics.map((topic) => ({ topic })));
    } catch {
      // not running yet: there is nothing to finish
    }
    for (const held of this.held.values()) held.window.wake();
    while (this.handlers.size > 0 || this.batches.size > 0) await Promise.allSettled([...this.handlers, ...this.batches]);
    // A commit refused during a rebalance is made good by the last one.
    await Promise.all([...this.held.values()].map((held) => this.commit(held)));
    clearInterval(this.beating);
    await this.consumer?.disconnect();
  }

  async abandon(): Promise<void> {
    if (this.abandoned) return;
    this.abandoned = true;
    this.abandonNow();
    this.forget();
    for (const held of this.held.values()) held.window.wake();
    clearInterval(this.beating);
    await this.consumer?.disconnect();
  }
}
