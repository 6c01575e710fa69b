import { type SchemaValidator, compiledSchemaFile, describeMismatch, schemaProblems } from '../platform/schemas.js';
import type { TopicSpec } from '../message-log/message-log.js';
import type { BatchEventMessage } from './batch-event-message.js';
import type { InteractiveLoadMessage } from './interactive-load-message.js';
import type { WorkMessage } from './work-message.js';

/** The public topic downstream consumers subscribe to: every change in every batch's life. */
export const BATCH_EVENTS_TOPIC = 'batch-events';

/**
 * Where API processes say how much interactive traffic they serve, per model, so that inference
 * processors (which never see it) keep engine slots free for it. One partition: a handful of
 * small messages a second.
 */
export const INTERACTIVE_LOAD_TOPIC = 'spool.fleet.interactive-load';

/** Work topics, one per processor kind; each kind is one consumer group. */
export const WORK_TOPICS = {
  validator: 'spool.batch.validate',
  inference: 'spool.batch.inference',
  finalizer: 'spool.batch.finalize',
  checkpoint: 'spool.weights.sync',
} as const;

export type ProcessorKind = keyof typeof WORK_TOPICS;
export const PROCESSOR_KINDS = Object.keys(WORK_TOPICS) as ProcessorKind[];

/**
 * The topics and their partitions. The inference topic has the most: its partitions are the unit
 * that spreads one batch's chunks over the running inference processors.
 */
export function spoolTopics(partitions: number, inferencePartitions = partitions * 2): TopicSpec[] {
  return [
    { topic: BATCH_EVENTS_TOPIC, partitions },
    { topic: WORK_TOPICS.validator, partitions },
    { topic: WORK_TOPICS.inference, partitions: inferencePartitions },
    { topic: WORK_TOPICS.finalizer, partitions },
    { topic: WORK_TOPICS.checkpoint, partitions },
    { topic: INTERACTIVE_LOAD_TOPIC, partitions: 1 },
  ];
}

export class MessageSchemaError extends Error {
  override readonly name = 'MessageSchemaError';
}

/** Checks messages against schemas/messages: what the relay writes and what processors read. */
export class MessageSchemas {
  private readonly work = compiledSchemaFile<WorkMessage>('messages', 'work-message.v1');
  private readonly batchEvent = compiledSchemaFile<BatchEventMessage>('messages', 'batch-event.v1');
  private readonly interactiveLoad = compiledSchemaFile<InteractiveLoadMessage>('messages', 'interactive-load.v1');

  encodeWork(message: WorkMessage): string {
    return this.encode(this.work, message, 'work message');
  }

  /** Parses a work message; throws MessageSchemaError for anything else. */
  decodeWork(text: string): WorkMessage {
    return this.decode(this.work, text, 'work message');
  }

  encodeBatchEvent(message: BatchEventMessage): string {
    return this.encode(this.batchEvent, message, 'batch-events message');
  }

  encodeInteractiveLoad(message: InteractiveLoadMessage): string {
    return this.encode(this.interactiveLoad, message, 'interactive-load message');
  }

  /** Parses an interactive-load message; throws MessageSchemaError for anything else. */
  decodeInteractiveLoad(text: string): InteractiveLoadMessage {
    return this.decode(this.interactiveLoad, text, 'interactive-load message');
  }

  private encode(validate: SchemaValidator, message: unknown, what: string): string {
    this.check(validate, message, what);
    return JSON.stringify(message);
  }

  private decode<T>(validate: SchemaValidator, text: string, what: string): T {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw new MessageSchemaError(`${what} is not JSON`);
    }
    this.check(validate, value, what);
    return value as T;
  }

  private check(validate: SchemaValidator, value: unknown, what: string): void {
    if (validate(value)) return;
    throw new MessageSchemaError(describeMismatch(`${what} does not match its schema`, schemaProblems(validate.errors)));
  }
}
