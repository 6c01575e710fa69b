// The message log port. Both adapters (the embedded in-process log, Kafka through kafkajs) implement
// it and are held to it by one contract suite (test/support/message-log-contract.ts).

import { backoffDelay } from '../platform/retry.js';

export interface OutgoingMessage {
  /** Messages with the same key go to the same partition, so they are delivered in order. */
  readonly key: string;
  /**
   * Instead of the key, lay the message on partition `spread` modulo the partition count: work
   * items numbered 0, 1, 2… then fill the partitions evenly, where hashing keys would leave some
   * partitions (and the consumers holding them) with more than others.
   */
  readonly spread?: number;
  readonly value: string;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface DeliveredMessage {
  readonly topic: string;
  readonly partition: number;
  /** The message's offset in its partition, as a decimal string (Kafka offsets are 64-bit). */
  readonly offset: string;
  readonly key: string;
  readonly value: string;
  readonly headers: Readonly<Record<string, string>>;
}

export interface TopicSpec {
  readonly topic: string;
  readonly partitions: number;
}

export interface ConsumeOptions {
  /** Consumers in one group share the topics' partitions; each message reaches one of them. */
  readonly groupId: string;
  readonly topics: readonly string[];
  /** Partitions handled at once by this consumer. */
  readonly concurrency?: number;
  /**
   * Messages of one partition handed to the handler at once (default 1: strictly one after
   * another, in order). Above 1 the handlers of a partition's next `prefetch` messages run
   * together and may finish in any order; a message's offset is committed only once it and every
   * earlier message of its partition have finished (the contiguous finished prefix), so a member
   * that dies redelivers every message not known to be finished. At most `concurrency` ×
   * `prefetch` handlers run at once. The window slides: a message published while earlier ones
   * of its partition run is handed over as soon as fewer than `prefetch` of them are unfinished.
   */
  readonly prefetch?: number;
  /**
   * Where a group starts on a partition it has committed nothing on: its oldest message
   * (`earliest`, the default), or what is published from about when it joins (`latest`), for
   * messages that only say what is true now (a load report), which a group of its own per process
   * would otherwise read from the start of the topic's retention at every start.
   */
  readonly startAt?: 'earliest' | 'latest';
  /** Delay before a message whose handler failed is handled again (doubled up to 30 s). */
  readonly retryDelayMs?: number;
  /** Called when a handler fails; the message is retried. */
  readonly onError?: (error: unknown, message: DeliveredMessage) => void;
}

/**
 * Resolving commits the message's offset (with `prefetch`, once every earlier message of its
 * partition has resolved too); rejecting delivers it again, to this consumer after a delay, or to
 * another member of the group if this one leaves first. At least once, therefore: handlers must
 * be idempotent.
 */
export type MessageHandler = (message: DeliveredMessage) => Promise<void>;

export interface Consumer {
  /**
   * Leaves the group once the handlers running now have finished and the finished prefix of each
   * partition is committed; nothing new is started meanwhile.
   */
  stop(): Promise<void>;
  /**
   * Leaves the group at once, committing nothing more: as if the process had died. Handlers
   * still running go on, but their messages are not committed and will be delivered again.
   */
  abandon(): Promise<void>;
  /**
   * Which of `topic`'s partitions (indexes) this member holds now; undefined where the log does not
   * share partitions between members (the embedded log: one process holds them all).
   */
  partitionsHeld?(topic: string): readonly number[] | undefined;
}

export interface MessageLog {
  /** Creates the topics that do not exist yet. */
  ensureTopics(topics: readonly TopicSpec[]): Promise<void>;
  /** Appends messages; resolves once the log holds them all. */
  publish(topic: string, messages: readonly OutgoingMessage[]): Promise<void>;
  /** Joins a consumer group; a group with no committed offset starts at the topic's beginning (see ConsumeOptions.startAt). */
  consume(options: ConsumeOptions, handler: MessageHandler): Promise<Consumer>;
  readonly description: string;
  /** Which adapter this is, for /ready and for what only one of them needs (so nothing asks the configuration again). */
  readonly kind: 'embedded' | 'kafka';
  close(): Promise<void>;
}

/** Where a key lands: the same key always on the same partition (FNV-1a, not Kafka's murmur2). */
export function partitionFor(key: string, partitions: number): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < key.length; index++) {
    hash ^= key.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % partitions;
}

/** The partition of an outgoing message among `partitions`. */
export function partitionOf(message: OutgoingMessage, partitions: number): number {
  return message.spread !== undefined ? message.spread % partitions : partitionFor(message.key, partitions);
}

/** The wait before a failed handler's next try (`failures` in a row): retryDelayMs (default 500), doubled up to 30 s. */
export const handlerRetryDelay = (options: Pick<ConsumeOptions, 'retryDelayMs'>, failures: number): number => backoffDelay({ firstMs: options.retryDelayMs ?? 500, maxMs: 30_000 }, failures);
