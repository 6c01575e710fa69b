import Database from 'better-sqlite3';
import type { Logger } from 'pino';
import { type BatchEventType, type Validation, isBatchEventType, statusAfter } from '../../src/domain/batch.js';
import { parseStreamName } from '../../src/domain/stream-names.js';
import type { StorageSpace } from '../../src/platform/storage-space.js';
import {
  type EventStore,
  type Position,
  type RecordedEvent,
  type Subscription,
  positionFromString,
  positionToString,
} from '../../src/event-store/event-store.js';
import { preparePrivateDatabaseFile } from '../../src/platform/private-files.js';
import { type MessageLog, type OutgoingMessage, partitionFor } from '../../src/message-log/message-log.js';
import { type Backoff, backoffDelay } from '../../src/platform/retry.js';
import { BATCH_EVENTS_TOPIC, type MessageSchemas, WORK_TOPICS } from '../../src/messages/topics.js';
import type { BatchEventMessage } from '../../src/messages/batch-event-message.js';
import type { WorkMessage } from '../../src/messages/work-message.js';

/** Where the relay has got to in the event log. */
export interface RelayCheckpoint {
  load(): Position | undefined;
  save(position: Position): void;
  close(): void;
}

/**
 * In memory: the relay starts from the beginning of the log at every start. Right for the embedded
 * message log, which itself starts empty: everything is published again and processors skip
 * what is done already.
 */
export class MemoryRelayCheckpoint implements RelayCheckpoint {
  private position: Position | undefined;
  load(): Position | undefined {
    return this.position;
  }
  save(position: Position): void {
    this.position = position;
  }
  close(): void {}
}

/** In a SQLite file: the relay resumes where it stopped (for a durable message log such as Kafka). */
export class SqliteRelayCheckpoint implements RelayCheckpoint {
  private readonly db: Database.Database;
  private readonly saveStatement: Database.Statement<[string]>;

  constructor(path: string) {
    preparePrivateDatabaseFile(path);
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.exec('CREATE TABLE IF NOT EXISTS relay_checkpoint (id INTEGER PRIMARY KEY CHECK (id = 1), position TEXT NOT NULL)');
    this.saveStatement = this.db.prepare('INSERT INTO relay_checkpoint (id, position) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET position = excluded.position');
  }

  load(): Position | undefined {
    const row = this.db.prepare<[], { position: string }>('SELECT position FROM relay_checkpoint WHERE id = 1').get();
    return row ? positionFromString(row.position) : undefined;
  }

  save(position: Position): void {
    this.saveStatement.run(positionToString(position));
  }

  close(): void {
    this.db.close();
  }
}

/**
 * What the relay publishes for one page of the log, topic by topic. `batchEvents`: whether the
 * public batch-events topic is among them (not on the embedded log, which nobody outside the
 * process can read: there it only held memory).
 */
export function messagesFor(
  events: readonly RecordedEvent[],
  schemas: MessageSchemas,
  { batchEvents = true, accountOf = () => undefined }: { batchEvents?: boolean; accountOf?: (batchId: string) => string | null | undefined } = {},
): Map<string, OutgoingMessage[]> {
  const out = new Map<string, OutgoingMessage[]>();
  const add = (topic: string, key: string, value: string, eventId: string, spread?: number, account?: string | null) => {
    const list = out.get(topic) ?? [];
    // The account (where the batch has one) as a header too: consumers may route without parsing the value.
    list.push({ key, value, headers: { 'event-id': eventId, ...(account ? { 'account-id': account } : {}) }, ...(spread !== undefined ? { spread } : {}) });
    out.set(topic, list);
  };
  const work = (topic: string, key: string, message: WorkMessage, spread?: number) => add(topic, key, schemas.encodeWork(message), message.event_id, spread);
  // Line outcomes and weight-sync steps come in runs: one look per batch or model per page is enough.
  const finalizeLooks = new Map<string, RecordedEvent>();
  const weightLooks = new Map<string, RecordedEvent>();

  for (const event of events) {
    const stream = parseStreamName(event.streamName);
    if (stream?.kind === 'batch' && isBatchEventType(event.type)) {
      // Made here, not for every event: most of a page is line outcomes, which publish nothing of their own.
      const position = positionToString(event.position);
      const base = { position, event_id: event.id };
      const batchId = String(event.data.batch_id);
      if (batchEvents) {
        const account = accountOf(batchId);
        add(BATCH_EVENTS_TOPIC, batchId, schemas.encodeBatchEvent(batchEventMessage(event, event.type, batchId, position, account)), event.id, undefined, account);
      }
      if (event.type === 'BatchCreated') work(WORK_TOPICS.validator, batchId, { kind: 'validate-batch', batch_id: batchId, ...base });
      if (event.type === 'BatchValidated') {
        for (const chunk of (event.data as unknown as Validation).chunks) {
          // Round robin over the partitions (from a place that depends on the batch), so that
          // every inference processor gets its share of every batch.
          work(WORK_TOPICS.inference, `${batchId}/${chunk.index}`, { kind: 'run-chunk', batch_id: batchId, chunk: chunk.index, ...base }, partitionFor(batchId, 2 ** 31) + chunk.index);
        }
      }
      // A wind-down may leave nothing to run; a crash may interrupt finalizing: look again.
      if (event.type === 'BatchCancelRequested' || event.type === 'BatchExpiryStarted' || event.type === 'BatchFinalizing') finalizeLooks.set(batchId, event);
    } else if (event.type === 'LineCompleted' || event.type === 'LineFailed') {
      // The batch id from the stream's name: the outcome's data (a whole response) is not read.
      if (stream?.kind === 'batchlines') finalizeLooks.set(stream.id, event);
    } else if (stream?.kind === 'weights' && typeof event.data.model === 'string') {
      weightLooks.set(event.data.model, event);
    }
  }
  for (const [batchId, event] of finalizeLooks) {
    work(WORK_TOPICS.finalizer, batchId, { kind: 'finalize-batch', batch_id: batchId, position: positionToString(event.position), event_id: event.id });
  }
  for (const [model, event] of weightLooks) {
    work(WORK_TOPICS.checkpoint, model, { kind: 'sync-weights', model, position: positionToString(event.position), event_id: event.id });
  }
  return out;
}

/** One lifecycle event of a batch as the public batch-events topic carries it. */
function batchEventMessage(event: RecordedEvent, type: BatchEventType, batchId: string, position: string, account: string | null | undefined): BatchEventMessage {
  return {
    // The account that owns the batch (ACCOUNTS=required), for consumers that route by it; absent otherwise.
    ...(account ? { account_id: account } : {}),
    event_id: event.id,
    event_type: type,
    schema_version: event.metadata.schemaVersion,
    batch_id: batchId,
    status: statusAfter(type),
    stream: event.streamName,
    revision: Number(event.revision),
    position,
    recorded_at: event.recordedAt,
    data: event.data,
  };
}

/** Batches whose account the relay remembers (it reads a batch's first event for one it has not seen created). */
const REMEMBERED_ACCOUNTS = 10_000;

/** Events gathered before one publish; an adapter that delivers one event at a time is batched up to this. */
const FLUSH_EVENTS = 500;
const FLUSH_MS = 20;
/** While the message log is away, a page is tried again after 0.5 s, then up to every 30 s. */
const PUBLISH_BACKOFF: Backoff = { firstMs: 500, maxMs: 30_000 };

/**
 * Publishes the event log to the message log: work for the processors and every batch lifecycle
 * event on the public batch-events topic. Events are published a page at a time, then the
 * checkpoint moves past them; a crash in between publishes the page again (at least once on the
 * wire), and every message carries its event id so that consumers drop what they have seen.
 */
export class EventRelay {
  private subscription: Subscription | undefined;
  private stopping = false;
  private stopNow: () => void = () => undefined;
  private readonly stopped = new Promise<void>((resolve) => {
    this.stopNow = resolve;
  });
  private pending: RecordedEvent[] = [];
  /** Each recent batch's account (null: none), for the batch-events messages. */
  private readonly accounts = new Map<string, string | null>();
  private flushing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private abandoned = false;
  /** Events relayed since start. */
  relayed = 0;
  /** Why the last attempt failed, until one succeeds (for /ready). */
  failure: string | undefined;

  constructor(
    private readonly deps: {
      eventStore: EventStore;
      messageLog: MessageLog;
      schemas: MessageSchemas;
      checkpoint: RelayCheckpoint;
      log: Pick<Logger, 'info' | 'warn' | 'error'>;
      /** Told whether the checkpoint's writes find room (relay.sqlite, on Kafka). */
      storage?: Pick<StorageSpace, 'refused' | 'wrote'>;
      /** Whether to publish the public batch-events topic (default true; see messagesFor). */
      batchEvents?: boolean;
    },
  ) {}

  /** Where the relay's checkpoint is: every event up to it is published. */
  publishedUpTo(): Position | undefined {
    return this.deps.checkpoint.load();
  }

  start(): void {
    const after = this.deps.checkpoint.load();
    this.deps.log.info({ from: after ? positionToString(after) : 'start', to: this.deps.messageLog.description }, 'relay starting');
    const subscription = this.deps.eventStore.subscribeToAll(after ? { after } : {}, (events) => this.accept(events));
    this.subscription = subscription;
    // A subscription that fails (the event store went away) is opened again from the checkpoint:
    // events gathered but not published come again.
    subscription.done.catch(async (error: unknown) => {
      if (this.stopping) return;
      this.failure = `the event log subscription failed: ${error instanceof Error ? error.message : String(error)}`;
      this.deps.log.error({ err: error }, 'relay subscription failed; subscribing again');
      clearTimeout(this.timer);
      this.timer = undefined;
      this.pending = [];
      await this.flushing;
      await this.sleep(1_000);
      if (!this.stopping) this.start();
    });
  }

  private async accept(events: readonly RecordedEvent[]): Promise<void> {
    this.pending.push(...events);
    if (this.pending.length >= FLUSH_EVENTS) await this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  /** Publishes what is gathered, after whatever is being published. */
  private flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const page = this.pending;
    this.pending = [];
    if (page.length > 0) {
      this.flushing = this.flushing.then(() => this.publish(page)).catch((error: unknown) => this.deps.log.warn({ err: error }, 'relay stopped before it could publish; the events will be published at the next start'));
    }
    return this.flushing;
  }

  private async publish(events: readonly RecordedEvent[]): Promise<void> {
    // After a page that could not be published, no later page may move the checkpoint past it.
    if (this.abandoned) throw new Error('an earlier page was not published');
    let failures = 0;
    // The page is published whole before the checkpoint moves; while the message log is away
    // the relay waits and tries again rather than skip anything.
    for (;;) {
      try {
        const batchEvents = this.deps.batchEvents ?? true;
        if (batchEvents) await this.learnAccounts(events);
        const accountOf = (batchId: string) => this.accounts.get(batchId);
        for (const [topic, list] of messagesFor(events, this.deps.schemas, { batchEvents, accountOf })) await this.deps.messageLog.publish(topic, list);
        this.deps.checkpoint.save(events[events.length - 1]!.position);
        this.deps.storage?.wrote();
        break;
      } catch (error) {
        if (this.stopping) {
          this.abandoned = true;
          throw error;
        }
        this.failure = `could not publish: ${error instanceof Error ? error.message : String(error)}`;
        const delay = backoffDelay(PUBLISH_BACKOFF, ++failures);
        // A checkpoint refused for lack of space is logged once for the episode, not at each retry.
        if (!this.deps.storage?.refused(error, 'relay checkpoint')) this.deps.log.warn({ err: error, retry_in_ms: delay }, 'relay could not publish; it will try again');
        await this.sleep(delay);
      }
    }
    this.failure = undefined;
    this.relayed += events.length;
  }

  /** The account of every batch with a lifecycle event in the page: from its BatchCreated, in the page or first in its stream. */
  private async learnAccounts(events: readonly RecordedEvent[]): Promise<void> {
    for (const event of events) {
      if (!isBatchEventType(event.type) || parseStreamName(event.streamName)?.kind !== 'batch') continue;
      const batchId = String(event.data.batch_id);
      if (event.type === 'BatchCreated') this.remember(batchId, typeof event.data.account_id === 'string' ? event.data.account_id : null);
      if (this.accounts.has(batchId)) continue;
      let account: string | null = null;
      for await (const first of this.deps.eventStore.readStream(event.streamName)) {
        if (first.type === 'BatchCreated' && typeof first.data.account_id === 'string') account = first.data.account_id;
        break;
      }
      this.remember(batchId, account);
    }
  }

  private remember(batchId: string, account: string | null): void {
    this.accounts.delete(batchId);
    this.accounts.set(batchId, account);
    if (this.accounts.size > REMEMBERED_ACCOUNTS) this.accounts.delete(this.accounts.keys().next().value!);
  }

  private sleep(ms: number): Promise<void> {
    return Promise.race([new Promise<void>((resolve) => setTimeout(resolve, ms).unref()), this.stopped]);
  }

  async stop(): Promise<void> {
    // From here each publish is tried once: what the message log does not take at once stays
    // behind the checkpoint, and the next start publishes it.
    this.stopping = true;
    this.stopNow();
    await this.subscription?.stop().catch(() => undefined);
    this.subscription = undefined;
    await this.flush();
    this.deps.checkpoint.close();
  }
}
