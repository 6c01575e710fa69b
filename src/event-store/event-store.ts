// The event store port. Both adapters (embedded SQLite, EventStoreDB/KurrentDB) implement it and
// are held to it by one contract suite (test/support/event-store-contract.ts).

/**
 * A place in the global log. EventStoreDB positions are a (commit, prepare) pair: events appended
 * together share a commit position, so both halves are needed to order them. The embedded store
 * uses its sequence number for both.
 */
export interface Position {
  readonly commit: bigint;
  readonly prepare: bigint;
}

export function comparePositions(a: Position, b: Position): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  if (a.prepare !== b.prepare) return a.prepare < b.prepare ? -1 : 1;
  return 0;
}

export function positionToString(position: Position): string {
  return `${position.commit}/${position.prepare}`;
}

export function positionFromString(text: string): Position {
  const match = /^(\d+)\/(\d+)$/.exec(text);
  if (!match) throw new Error(`not a log position: ${JSON.stringify(text)}`);
  return { commit: BigInt(match[1]!), prepare: BigInt(match[2]!) };
}

export interface EventMetadata {
  /** Version of the event's JSON Schema (schemas/events/<type>.v<version>.json). */
  readonly schemaVersion: number;
  readonly correlationId?: string;
  readonly causationId?: string;
  readonly requestId?: string;
  /** The account and key that asked for it (ACCOUNTS=required): the audit trail's who. */
  readonly accountId?: string;
  readonly keyId?: string;
}

export interface NewEvent<Data = Record<string, unknown>> {
  /** A UUID. Appending an event whose id the stream already holds is a no-op (idempotent append). */
  readonly id: string;
  readonly type: string;
  readonly data: Data;
  /**
   * `data` as JSON text, where it is at hand: written by the appender already (a batch line's
   * outcome, whose body came as text), which a store that keeps JSON text takes as it is; or, on
   * an event read from such a store, the text it keeps.
   */
  readonly serializedData?: string;
  readonly metadata: EventMetadata;
}

export interface RecordedEvent<Data = Record<string, unknown>> extends NewEvent<Data> {
  readonly streamName: string;
  /** 0 for the first event of a stream. */
  readonly revision: bigint;
  readonly position: Position;
  /** Unix milliseconds at which the store recorded the event. */
  readonly recordedAt: number;
}

/** 'no_stream': the stream must not exist; 'stream_exists': it must; a bigint: its last revision. */
export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | bigint;

export interface AppendResult {
  /** Revision of the stream's last event, to pass as expectedRevision next time. */
  readonly nextExpectedRevision: bigint;
  /** Position of the last appended event. */
  readonly position: Position;
  /**
   * true: nothing was written, the events were recorded before (this append sent again, or
   * another writer's append of the same event ids, which may have held other data); false: the
   * append wrote them now; absent where the store cannot tell (KurrentDB answers a repeat of an
   * append as it answered the first).
   */
  readonly repeated?: boolean;
}

export interface Subscription {
  /** Stops delivery; resolves once no handler call is running. */
  stop(): Promise<void>;
  /**
   * Reads the log now where the subscription would wait for its next poll: someone knows of an
   * event it may not have read yet (a work message names one another process appended). Nothing
   * to do for a subscription the store pushes events to.
   */
  wake(): void;
  /** Resolves when the subscription ends: rejects if it failed (a handler threw, the store went away). */
  readonly done: Promise<void>;
}

export type EventBatchHandler = (events: readonly RecordedEvent[]) => Promise<void> | void;

export interface EventStore {
  /** Which adapter this is, for /ready and for what only one of them needs (so nothing asks the configuration again). */
  readonly kind: 'embedded' | 'eventstoredb' | 'postgres';
  appendToStream(
    streamName: string,
    events: readonly NewEvent[],
    options?: { expectedRevision?: ExpectedRevision },
  ): Promise<AppendResult>;

  /** Events of one stream in revision order; an unknown stream yields nothing. */
  readStream(streamName: string, options?: { fromRevision?: bigint }): AsyncIterable<RecordedEvent>;

  /** Up to maxCount events of the whole log, strictly after `after` (from the start when omitted). */
  readAll(options: { after?: Position; maxCount: number }): Promise<RecordedEvent[]>;

  /** Position of the newest event in the log, or undefined when the log is empty. */
  headPosition(): Promise<Position | undefined>;

  /**
   * Catch-up subscription to the whole log: past events strictly after `after`, then live ones,
   * in log order, delivered in batches. The next batch waits for the handler to finish.
   */
  subscribeToAll(options: { after?: Position }, handler: EventBatchHandler): Subscription;

  close(): Promise<void>;
}

export class WrongExpectedRevisionError extends Error {
  override readonly name = 'WrongExpectedRevisionError';
  constructor(
    readonly streamName: string,
    readonly expected: ExpectedRevision,
    /** The stream's last revision, or 'no_stream'. */
    readonly actual: bigint | 'no_stream',
  ) {
    super(`stream ${streamName}: expected revision ${String(expected)}, found ${String(actual)}`);
  }
}

/** An append whose event ids partly match events already in the stream: neither a retry nor new. */
export class IdempotencyConflictError extends Error {
  override readonly name = 'IdempotencyConflictError';
  constructor(readonly streamName: string, readonly eventIds: readonly string[]) {
    super(`stream ${streamName}: events ${eventIds.join(', ')} were appended before, but not as this same append`);
  }
}

/**
 * The event store cannot be reached just now (a lost connection, a server restarting): nothing
 * says the request was wrong, and the same request may succeed shortly. An append cut off this
 * way may still have been committed; sent again with the same event ids, it is answered as the
 * first (idempotent append).
 */
export class EventStoreUnavailableError extends Error {
  override readonly name = 'EventStoreUnavailableError';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`the event store is unreachable: ${detail}`, options);
  }
}

