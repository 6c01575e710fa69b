import type { Logger } from 'pino';
import type { Projector } from '../../projections/projector.js';
import { type EventStore, EventStoreUnavailableError, type Position, comparePositions, positionFromString } from '../../src/event-store/event-store.js';
import type { Consumer, MessageLog } from '../../src/message-log/message-log.js';
import { MessageSchemaError, type MessageSchemas, type ProcessorKind, WORK_TOPICS } from '../../src/messages/topics.js';
import type { WorkMessage } from '../../src/messages/work-message.js';
import { ChunkInterruptedError } from '../batch/batch-runner.js';
import { type StorageSpace, isOutOfSpace } from '../../src/platform/storage-space.js';

/** How long a message waits for this process's read models to reach the event behind it. */
const CATCH_UP_MS = 60_000;
/** How long a position past the log's head is given before its message is judged another log's. */
const HEAD_RECHECK_MS = 1_000;

/**
 * One processor kind's membership in its consumer group. A work message only says where to look;
 * the handler acts on the read models once they hold the event that caused the message, so a
 * message delivered twice, or late, does only what is still to do. The offset is committed after
 * the handler's result events are appended (the handler resolves after its appends).
 */
export class WorkConsumer {
  private consumer: Consumer | undefined;
  /** Work messages handled to the end by this process (for /ready and for operators). */
  handled = 0;

  constructor(
    private readonly deps: {
      kind: ProcessorKind;
      messageLog: MessageLog;
      schemas: MessageSchemas;
      eventStore: EventStore;
      projector: Projector;
      /** Messages (partitions) handled at once. */
      concurrency: number;
      /** Messages of one partition handled at once (their offsets committed in order). */
      prefetch?: number;
      log: Pick<Logger, 'info' | 'warn' | 'error'>;
      handle: (message: WorkMessage) => Promise<void>;
      /** Told of work that failed for lack of storage space: the episode is logged there, once, not each retry here. */
      storage?: Pick<StorageSpace, 'refused'>;
    },
  ) {}

  async start(): Promise<void> {
    const { kind, log } = this.deps;
    this.consumer = await this.deps.messageLog.consume(
      {
        groupId: `spool-${kind}`,
        topics: [WORK_TOPICS[kind]],
        concurrency: this.deps.concurrency,
        ...(this.deps.prefetch ? { prefetch: this.deps.prefetch } : {}),
        onError: (error, message) => {
          if (error instanceof ChunkInterruptedError) {
            log.info({ topic: message.topic, partition: message.partition, offset: message.offset, reason: error.message }, 'work left for the next start');
          } else if (isOutOfSpace(error)) {
            // Retried like any failure, until space is freed; the storage episode is the one log line for it.
            this.deps.storage?.refused(error, `${kind} processor`);
          } else if (error instanceof EventStoreUnavailableError) {
            // A condition (the store restarting, the network away), not a defect: no stack.
            log.warn({ reason: error.message, topic: message.topic, partition: message.partition, offset: message.offset }, 'work waits for the event store; it will be tried again');
          } else {
            log.error({ err: error, topic: message.topic, partition: message.partition, offset: message.offset }, 'work failed; it will be tried again');
          }
        },
      },
      async (delivered) => {
        let message: WorkMessage;
        try {
          message = this.deps.schemas.decodeWork(delivered.value);
        } catch (error) {
          if (!(error instanceof MessageSchemaError)) throw error;
          // Retrying cannot make it valid: it is logged and passed over.
          log.error({ err: error, topic: delivered.topic, partition: delivered.partition, offset: delivered.offset }, 'malformed work message skipped');
          return;
        }
        const position = positionFromString(message.position);
        if (await this.pointsPastTheLog(position)) {
          log.error({ topic: delivered.topic, partition: delivered.partition, offset: delivered.offset, position: message.position }, 'work message points past the end of the event log; skipped');
          return;
        }
        await this.deps.projector.waitFor(position, CATCH_UP_MS);
        await this.deps.handle(message);
        this.handled++;
      },
    );
    log.info({ kind, topic: WORK_TOPICS[kind] }, 'processor consuming');
  }

  /**
   * A message from another log (the event store was replaced under old topics, or a deployment's
   * leftovers on a shared broker) names a position the log has never reached. Waiting for the
   * read models to reach it would hold its partition, and every message behind it, for the whole
   * catch-up time. The relay publishes only what the store holds, so a position past the store's
   * head, twice a moment apart (a replica's view of the head may trail), is not this log's.
   */
  private async pointsPastTheLog(position: Position): Promise<boolean> {
    if (this.deps.projector.reached(position)) return false;
    for (let look = 0; ; look++) {
      const head = await this.deps.eventStore.headPosition();
      if (head && comparePositions(position, head) <= 0) return false;
      if (look === 1) return true;
      await new Promise((resolve) => setTimeout(resolve, HEAD_RECHECK_MS));
    }
  }

  /** Which of its topic's partitions this process holds now; undefined where one process holds them all. */
  partitionsHeld(): readonly number[] | undefined {
    return this.consumer?.partitionsHeld?.(WORK_TOPICS[this.deps.kind]);
  }

  get kind(): ProcessorKind {
    return this.deps.kind;
  }

  async stop(): Promise<void> {
    await this.consumer?.stop();
    this.consumer = undefined;
  }
}
