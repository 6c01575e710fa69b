import { type Admin, type EachBatchPayload, type ICustomPartitioner, type Consumer as KafkaConsumer, Kafka, type KafkaMessage, type Producer, Partitioners, logLevel } from 'kafkajs';
import type { Logger } from 'pino';
import {
  type ConsumeOptions,
  type Consumer,
  type DeliveredMessage,
  type MessageHandler,
  type MessageLog,
  type OutgoingMessage,
  type TopicSpec,
  nextRetryDelay,
} from './message-log.js';

export interface KafkaSettings {
  /** host:port of one or more brokers. */
  readonly brokers: readonly string[];
  readonly clientId: string;
  /** How long the group waits for a silent member before handing its partitions to others. */
  readonly sessionTimeoutMs: number;
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
  readonly description: string;
  private readonly kafka: Kafka;
  private producer: Promise<Producer> | undefined;
  private readonly consumers = new Set<KafkaGroupMember>();

  constructor(
    private readonly settings: KafkaSettings,
    private readonly log: Pick<Logger, 'error' | 'warn' | 'info' | 'debug'>,
  ) {
    this.description = `kafka ${settings.brokers.join(',')}`;
    this.kafka = new Kafka({
      clientId: settings.clientId,
      brokers: [...settings.brokers],
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

class KafkaGroupMember implements Consumer {
  private consumer: KafkaConsumer | undefined;
  /** Messages being handled and committed: a graceful stop waits for them while still a member. */
  private readonly inFlight = new Set<Promise<void>>();
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
    const consumer = this.kafka.consumer({
      groupId: this.options.groupId,
      sessionTimeout: this.settings.sessionTimeoutMs,
      heartbeatInterval: Math.max(500, Math.floor(this.settings.sessionTimeoutMs / 10)),
      // A member finishes the messages it is handling before it rejoins a rebalance.
      rebalanceTimeout: Math.max(60_000, this.settings.sessionTimeoutMs * 2),
      retry: { ...RETRY, restartOnFailure: async () => !this.stopping && !this.abandoned },
    });
    this.consumer = consumer;
    await consumer.connect();
    await consumer.subscribe({ topics: [...this.options.topics], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      partitionsConsumedConcurrently: this.options.concurrency ?? 1,
      // Only handled messages are committed (autoCommit is off), and offsets are resolved by hand:
      // whatever is passed over while leaving the group is delivered again to whoever takes the
      // partition.
      eachBatchAutoResolve: false,
      eachBatch: async (payload) => {
        if (this.stopping || this.abandoned) return;
        const work = this.handleBatch(payload);
        this.inFlight.add(work);
        try {
          await work;
        } finally {
          this.inFlight.delete(work);
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

  /**
   * Handles a fetched batch of one partition, up to `prefetch` messages at once, resolving and
   * committing the contiguous prefix of finished messages. It starts nothing new once the member
   * stops or a rebalance is under way, and returns when the messages it started have finished.
   */
  private async handleBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    const { topic, partition, messages } = batch;
    const prefetch = Math.max(1, this.options.prefetch ?? 1);
    const finished = messages.map(() => false);
    const running = new Set<Promise<void>>();
    let next = 0;
    let prefix = 0; // messages before this index have finished
    let committing = Promise.resolve();
    let rebalance: { error: unknown } | undefined;
    const mayStart = () => !this.stopping && !this.abandoned && rebalance === undefined && isRunning() && !isStale();
    // A failed heartbeat means a rebalance is under way: the member rejoins once what it started
    // has finished, so the error is not thrown into the handling.
    const beating = setInterval(() => void heartbeat().catch(() => undefined), Math.max(500, Math.floor(this.settings.sessionTimeoutMs / 10)));
    const start = (index: number) => {
      const message = messages[index]!;
      const work: Promise<void> = this.handle(delivered(topic, partition, message)).then(async (handled) => {
        if (handled && !this.abandoned) {
          finished[index] = true;
          const before = prefix;
          while (prefix < messages.length && finished[prefix]) prefix++;
          if (prefix > before) {
            const offset = messages[prefix - 1]!.offset;
            resolveOffset(offset);
            // Commits go one after another, so a later prefix never lands before an earlier one.
            committing = committing.then(() => this.commit(topic, partition, offset));
          }
          // Committed before the heartbeat, which may report a rebalance.
          await committing;
          try {
            await heartbeat();
          } catch (error) {
            rebalance ??= { error };
          }
        }
        running.delete(work);
      });
      running.add(work);
    };
    try {
      for (;;) {
        while (running.size < prefetch && next < messages.length && mayStart()) start(next++);
        if (running.size === 0) break;
        await Promise.race(running);
      }
      await committing;
    } finally {
      clearInterval(beating);
    }
    // As with one message at a time: kafkajs rejoins the group on this error.
    if (rebalance) throw rebalance.error;
  }

  /** Runs the handler until it succeeds; false if the member left meanwhile. */
  private async handle(message: DeliveredMessage): Promise<boolean> {
    let delay = this.options.retryDelayMs ?? 500;
    for (;;) {
      try {
        const outcome = await Promise.race([this.handler(message).then(() => 'done' as const), this.abandonment.then(() => 'abandoned' as const)]);
        return outcome === 'done';
      } catch (error) {
        this.options.onError?.(error, message);
        if (this.stopping || this.abandoned) return false;
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = nextRetryDelay(delay);
        if (this.stopping || this.abandoned) return false;
      }
    }
  }

  private async commit(topic: string, partition: number, offset: string): Promise<void> {
    if (this.abandoned) return;
    try {
      await this.consumer!.commitOffsets([{ topic, partition, offset: (BigInt(offset) + 1n).toString() }]);
    } catch (error) {
      // The partition moved to another member meanwhile: it will handle the message again, and
      // handlers are idempotent.
      this.log.warn({ err: error, topic, partition, offset }, 'offset not committed; the message will be delivered again');
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
    await Promise.allSettled([...this.inFlight]);
    await this.consumer?.disconnect();
  }

  async abandon(): Promise<void> {
    if (this.abandoned) return;
    this.abandoned = true;
    this.abandonNow();
    this.forget();
    await this.consumer?.disconnect();
  }
}
