import Database from 'better-sqlite3';
import type { Logger } from 'pino';
import type { Validation } from '../src/domain/batch.js';
import {
  type EventStore,
  type Position,
  type RecordedEvent,
  type Subscription,
  positionFromString,
  positionToString,
} from '../src/event-store/event-store.js';
import { type MessageLog, type OutgoingMessage, nextRetryDelay, partitionFor } from '../src/message-log/message-log.js';
import { BATCH_EVENTS_TOPIC, type BatchEventMessage, type MessageSchemas, WORK_TOPICS, type WorkMessage } from '../src/message-log/topics.js';

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

const BATCH_STATUS_AFTER: Record<string, string | null> = {
  BatchCreated: 'validating',
  BatchValidated: 'in_progress',
  BatchFailed: 'failed',
  BatchCancelRequested: 'cancelling',
  BatchExpiryStarted: null,
  BatchFinalizing: 'finalizing',
  BatchCompleted: 'completed',
  BatchCancelled: 'cancelled',
  BatchExpired: 'expired',
};

/** What the relay publishes for one page of the log, topic by topic. */
export function messagesFor(events: readonly RecordedEvent[], schemas: MessageSchemas): Map<string, OutgoingMessage[]> {
  const out = new Map<string, OutgoingMessage[]>();
  const add = (topic: string, key: string, value: string, eventId: string, spread?: number) => {
    const list = out.get(topic) ?? [];
    list.push({ key, value, headers: { 'event-id': eventId }, ...(spread !== undefined ? { spread } : {}) });
    out.set(topic, list);
  };
  const work = (topic: string, key: string, message: WorkMessage, spread?: number) => add(topic, key, schemas.encodeWork(message), message.event_id, spread);
  // Line outcomes and weight-sync steps come in runs: one look per batch or model per page is enough.
  const finalizeLooks = new Map<string, RecordedEvent>();
  const weightLooks = new Map<string, RecordedEvent>();

  for (const event of events) {
    const position = positionToString(event.position);
    const base = { position, event_id: event.id };
    if (event.streamName.startsWith('batch-') && event.type in BATCH_STATUS_AFTER) {
      const batchId = String(event.data.batch_id);
      const message: BatchEventMessage = {
        event_id: event.id,
        event_type: event.type,
        schema_version: event.metadata.schemaVersion,
        batch_id: batchId,
        status: BATCH_STATUS_AFTER[event.type] ?? null,
        stream: event.streamName,
        revision: Number(event.revision),
        position,
        recorded_at: event.recordedAt,
        data: event.data,
      };
      add(BATCH_EVENTS_TOPIC, batchId, schemas.encodeBatchEvent(message), event.id);
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
      finalizeLooks.set(String(event.data.batch_id), event);
    } else if (event.streamName.startsWith('weights-') && typeof event.data.model === 'string') {
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

/**
 * Publishes the event log to the message log: work for the processors and every batch lifecycle
 * event on the public batch-events topic. A page of events is published, then the checkpoint
 * moves past it; a crash in between publishes the page again (at least once on the wire), and
 * every message carries its event id so that consumers drop what they have seen.
 */
export class EventRelay {
  private subscription: Subscription | undefined;
  private stopping = false;
  /** Events relayed since start. */
  relayed = 0;

  constructor(
    private readonly deps: {
      eventStore: EventStore;
      messageLog: MessageLog;
      schemas: MessageSchemas;
      checkpoint: RelayCheckpoint;
      log: Pick<Logger, 'info' | 'warn' | 'error'>;
    },
  ) {}

  start(): void {
    const after = this.deps.checkpoint.load();
    this.deps.log.info({ from: after ? positionToString(after) : 'start', to: this.deps.messageLog.description }, 'relay starting');
    this.subscription = this.deps.eventStore.subscribeToAll(after ? { after } : {}, (events) => this.relay(events));
    this.subscription.done.catch((error: unknown) => this.deps.log.error({ err: error }, 'relay stopped: the event log subscription failed'));
  }

  private async relay(events: readonly RecordedEvent[]): Promise<void> {
    const last = events[events.length - 1];
    if (!last) return;
    const messages = messagesFor(events, this.deps.schemas);
    let delay = 500;
    // The page is published whole before the checkpoint moves; while the message log is away
    // the relay waits and tries again rather than skip anything.
    for (;;) {
      try {
        for (const [topic, list] of messages) await this.deps.messageLog.publish(topic, list);
        break;
      } catch (error) {
        if (this.stopping) throw error;
        this.deps.log.warn({ err: error, retry_in_ms: delay }, 'relay could not publish; it will try again');
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = nextRetryDelay(delay);
      }
    }
    this.deps.checkpoint.save(last.position);
    this.relayed += events.length;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.subscription?.stop().catch(() => undefined);
    this.subscription = undefined;
  }
}
