import {
  ANY,
  BACKWARDS,
  END,
  EventStoreDBClient,
  FORWARDS,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  StreamNotFoundError,
  WrongExpectedVersionError,
  excludeSystemEvents,
  jsonEvent,
  type AppendExpectedRevision,
  type ResolvedEvent,
  type AllStreamResolvedEvent,
} from '@eventstore/db-client';
import {
  type AppendResult,
  type EventBatchHandler,
  type EventStore,
  type ExpectedRevision,
  IdempotencyConflictError,
  type NewEvent,
  type Position,
  type RecordedEvent,
  type Subscription,
  WrongExpectedRevisionError,
  comparePositions,
} from './event-store.js';

/**
 * How far back an append with expectedRevision 'any' looks for its own event ids. EventStoreDB
 * guarantees idempotency only for appends with an exact expected revision; with 'any' it is best
 * effort, so the adapter checks the stream's recent events itself.
 */
const IDEMPOTENCY_WINDOW = 1000;

/** The production event store: EventStoreDB or KurrentDB over gRPC (@eventstore/db-client). */
export class EventStoreDbEventStore implements EventStore {
  readonly kind = 'eventstoredb';
  private readonly client: EventStoreDBClient;
  private readonly subscriptions = new Set<Subscription>();

  constructor(connectionString: string) {
    this.client = EventStoreDBClient.connectionString(connectionString);
  }

  async appendToStream(
    streamName: string,
    events: readonly NewEvent[],
    options: { expectedRevision?: ExpectedRevision } = {},
  ): Promise<AppendResult> {
    if (events.length === 0) throw new Error('appendToStream needs at least one event');
    const expected = options.expectedRevision ?? 'any';
    if (expected === 'any') {
      const replayed = await this.findReplayedAppend(streamName, events);
      if (replayed) return replayed;
    }
    try {
      const result = await this.client.appendToStream(
        streamName,
        events.map((event) =>
          jsonEvent({ id: event.id, type: event.type, data: event.data as Record<string, unknown>, metadata: { ...event.metadata } }),
        ),
        { expectedRevision: toClientRevision(expected) },
      );
      if (!result.position) throw new Error(`EventStoreDB returned no position for an append to ${streamName}`);
      // No `repeated`: the server answers an append sent again with the same expected revision as
      // it answered the first, written or not.
      return { nextExpectedRevision: result.nextExpectedRevision, position: result.position };
    } catch (error) {
      if (!(error instanceof WrongExpectedVersionError)) throw error;
      const replayed = await this.findReplayedAppend(streamName, events);
      if (replayed) return replayed;
      const actual = typeof error.actualVersion === 'bigint' ? error.actualVersion : 'no_stream';
      throw new WrongExpectedRevisionError(streamName, expected, actual);
    }
  }

  /** If these exact events are already the stream's, answer as the first append did. */
  private async findReplayedAppend(streamName: string, events: readonly NewEvent[]): Promise<AppendResult | undefined> {
    const wanted = new Set(events.map((event) => event.id));
    const found: RecordedEvent[] = [];
    try {
      for await (const resolved of this.client.readStream(streamName, {
        direction: BACKWARDS,
        fromRevision: END,
        maxCount: IDEMPOTENCY_WINDOW,
      })) {
        const event = toRecordedEvent(resolved);
        if (event && wanted.has(event.id)) found.unshift(event);
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError) return undefined;
      throw error;
    }
    if (found.length === 0) return undefined;
    const sameAppend =
      found.length === events.length && found.every((event, index) => event.id === events[index]!.id);
    if (!sameAppend) throw new IdempotencyConflictError(streamName, found.map((event) => event.id));
    const last = found[found.length - 1]!;
    return { nextExpectedRevision: last.revision, position: last.position, repeated: true };
  }

  async *readStream(streamName: string, options: { fromRevision?: bigint } = {}): AsyncIterable<RecordedEvent> {
    try {
      for await (const resolved of this.client.readStream(streamName, {
        direction: FORWARDS,
        fromRevision: options.fromRevision ?? START,
      })) {
        const event = toRecordedEvent(resolved);
        if (event) yield event;
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError) return;
      throw error;
    }
  }

  async readAll(options: { after?: Position; maxCount: number }): Promise<RecordedEvent[]> {
    const collected: RecordedEvent[] = [];
    let from: Position | typeof START = options.after ?? START;
    // $all reads are inclusive of fromPosition and include system events: page past both.
    for (;;) {
      const page = await this.readAllPage(from, options.maxCount + 1);
      for (const event of page.events) {
        if (options.after && comparePositions(event.position, options.after) <= 0) continue;
        collected.push(event);
        if (collected.length === options.maxCount) return collected;
      }
      if (page.exhausted || !page.lastPosition) return collected;
      from = page.lastPosition;
    }
  }

  private async readAllPage(from: Position | typeof START, maxCount: number) {
    const events: RecordedEvent[] = [];
    let count = 0;
    let lastPosition: Position | undefined;
    for await (const resolved of this.client.readAll({ direction: FORWARDS, fromPosition: from, maxCount })) {
      count += 1;
      if (resolved.event?.position) lastPosition = resolved.event.position;
      const event = toRecordedEvent(resolved);
      if (event && !isSystemEvent(event)) events.push(event);
    }
    return { events, lastPosition, exhausted: count < maxCount };
  }

  async headPosition(): Promise<Position | undefined> {
    let from: Position | typeof END = END;
    for (;;) {
      let count = 0;
      let lastSeen: Position | undefined;
      for await (const resolved of this.client.readAll({ direction: BACKWARDS, fromPosition: from, maxCount: 100 })) {
        count += 1;
        const event = toRecordedEvent(resolved);
        if (event && !isSystemEvent(event)) return event.position;
        if (resolved.event?.position) lastSeen = resolved.event.position;
      }
      if (count < 100 || !lastSeen) return undefined;
      from = lastSeen;
    }
  }

  subscribeToAll(options: { after?: Position }, handler: EventBatchHandler): Subscription {
    // Subscriptions start strictly after fromPosition.
    const source = this.client.subscribeToAll({
      fromPosition: options.after ?? START,
      filter: excludeSystemEvents(),
    });
    let stopped = false;
    const run = async () => {
      for await (const resolved of source) {
        if (stopped) break;
        const event = toRecordedEvent(resolved);
        if (event) await handler([event]);
      }
    };
    const done = run();
    const subscription: Subscription = {
      done,
      stop: async () => {
        stopped = true;
        this.subscriptions.delete(subscription);
        await source.unsubscribe();
        await done.catch(() => undefined);
      },
      // The server pushes each event as it is written: nothing waits on a poll.
      wake: () => undefined,
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((subscription) => subscription.stop()));
    await this.client.dispose();
  }
}

function toClientRevision(expected: ExpectedRevision): AppendExpectedRevision {
  if (expected === 'any') return ANY;
  if (expected === 'no_stream') return NO_STREAM;
  if (expected === 'stream_exists') return STREAM_EXISTS;
  return expected;
}

function isSystemEvent(event: RecordedEvent): boolean {
  return event.type.startsWith('$') || event.streamName.startsWith('$');
}

/** The port's event for one the client read; undefined for what the port does not carry (not JSON, no position). */
export function toRecordedEvent(resolved: ResolvedEvent | AllStreamResolvedEvent): RecordedEvent | undefined {
  const event = resolved.event;
  if (!event || !event.isJson || !event.position) return undefined;
  return {
    id: event.id,
    type: event.type,
    data: event.data as Record<string, unknown>,
    metadata: event.metadata as unknown as RecordedEvent['metadata'],
    streamName: event.streamId,
    revision: event.revision,
    position: event.position,
    recordedAt: event.created instanceof Date ? event.created.getTime() : Number(event.created),
  };
}
