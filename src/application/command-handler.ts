import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import { newEventId } from '../platform/ids.js';
import { StreamStates } from './stream-states.js';
import type { Decider, DomainEvent } from '../domain/decider.js';
import type { Rejection } from '../domain/rejection.js';
import {
  type AppendResult,
  type EventMetadata,
  type EventStore,
  type NewEvent,
  type Position,
  WrongExpectedRevisionError,
} from '../event-store/event-store.js';

/** What a command carries into its events' metadata (the schema version is added on append). */
export type CommandMetadata = Omit<EventMetadata, 'schemaVersion'>;

export interface CommandOptions<Event> {
  readonly metadata?: CommandMetadata;
  /** Ids for the new events; random unless given (a derived id makes a repeated command append nothing). */
  readonly eventIds?: (event: Event, index: number) => string;
  /**
   * The stream is almost always new (its id was minted for this command, or is derived for a
   * stream made once): decided on the initial state without reading it first, as on a kept state.
   */
  readonly newStream?: boolean;
}

/** This process's read models, as far as a command's answer needs them. */
export interface ReadModelsPosition {
  /** Resolves once every read model holds the event at `position`. */
  waitFor(position: Position): Promise<void>;
}

/** What execute() needs: the log to decide on and the read models to wait for. */
export interface CommandContext {
  readonly eventStore: EventStore;
  readonly projector: ReadModelsPosition;
  readonly log: Pick<Logger, 'warn'>;
}

export interface Handled<State, Event> {
  readonly events: Event[];
  readonly state: State;
  /** Where the events landed; undefined when the decision produced no event. */
  readonly appended: AppendResult | undefined;
}

/** Schema version written with every new event; readers upcast older ones. */
const SCHEMA_VERSION = 1;
const MAX_ATTEMPTS = 5;

/**
 * The states kept between commands, one set per event store (StreamStates): every command path
 * loads through here, whichever store it was handed, and a state kept for one store never stands
 * for another's stream.
 */
const keptStates = new WeakMap<EventStore, StreamStates>();

function statesOf(store: EventStore): StreamStates {
  let states = keptStates.get(store);
  if (!states) keptStates.set(store, (states = new StreamStates()));
  return states;
}

/**
 * A stream's state and last revision: the state kept from an earlier command on it, with the
 * events appended since folded in, or the whole stream folded where none is kept.
 */
export async function loadState<State, Event extends DomainEvent>(
  store: EventStore,
  streamName: string,
  decider: Pick<Decider<unknown, State, Event>, 'evolve' | 'initialState'>,
): Promise<{ state: State; revision: bigint | undefined }> {
  const states = statesOf(store);
  const kept = states.get(streamName, decider);
  let state = kept?.state ?? decider.initialState;
  let revision: bigint | undefined = kept?.revision;
  for await (const recorded of store.readStream(streamName, revision === undefined ? {} : { fromRevision: revision + 1n })) {
    state = decider.evolve(state, { type: recorded.type, data: recorded.data } as unknown as Event);
    revision = recorded.revision;
  }
  if (revision !== undefined) states.keep(streamName, decider, state, revision);
  return { state, revision };
}

/**
 * Load a stream, decide, append with the revision that was read. A concurrent writer makes the
 * append fail; then the whole cycle runs again on the fresh state. Callers go through execute().
 */
async function handleCommand<Command, State, Event extends DomainEvent>(
  store: EventStore,
  streamName: string,
  decider: Decider<Command, State, Event>,
  command: Command,
  options: CommandOptions<Event> = {},
): Promise<E.Either<Rejection, Handled<State, Event>>> {
  // First, a kept state is decided on as it is, without reading the stream (the commands of a
  // batch's life mostly find nothing after it); the append's expected revision proves it
  // current. Where it was not, or the decision appends nothing (a refusal must rest on the
  // stream as it is), the stream is read as always.
  const kept = statesOf(store).get(streamName, decider) ?? (options.newStream ? { state: decider.initialState, revision: undefined } : undefined);
  if (kept) {
    const handled = await appendOnKeptState(store, streamName, decider, command, kept, options);
    if (handled) return handled;
  }
  for (let attempt = 1; ; attempt++) {
    const { state, revision } = await loadState(store, streamName, decider);
    const decision = decider.decide(command, state);
    if (E.isLeft(decision)) return decision;
    const events = decision.right;
    if (events.length === 0) return E.right({ events, state, appended: undefined });
    try {
      const { appended, next } = await appendAfter(store, streamName, decider, { state, revision }, events, options);
      return E.right({ events, state: next, appended });
    } catch (error) {
      if (error instanceof WrongExpectedRevisionError && attempt < MAX_ATTEMPTS) continue;
      throw error;
    }
  }
}

/**
 * Decides on a kept state (or a new stream's initial state) and appends right after it. Undefined
 * where the decision must rest on the stream read now: the decision appended nothing, the stream
 * had moved on (the append's expected revision refused it), or the append was answered as one
 * sent before (its events recorded elsewhere in the stream than right after this state).
 */
async function appendOnKeptState<Command, State, Event extends DomainEvent>(
  store: EventStore,
  streamName: string,
  decider: Decider<Command, State, Event>,
  command: Command,
  kept: { state: State; revision: bigint | undefined },
  options: CommandOptions<Event>,
): Promise<E.Either<Rejection, Handled<State, Event>> | undefined> {
  const decision = decider.decide(command, kept.state);
  if (E.isLeft(decision) || decision.right.length === 0) return undefined;
  const events = decision.right;
  try {
    const { appended, next, landed } = await appendAfter(store, streamName, decider, kept, events, options);
    return landed ? E.right({ events, state: next, appended }) : undefined;
  } catch (error) {
    if (error instanceof WrongExpectedRevisionError) return undefined;
    throw error;
  }
}

/**
 * Appends the events decided on a state, expecting the stream at its revision, and keeps the state
 * they make where they landed right after it (`landed`): an append sent again is answered with the
 * revisions of the first time, which may be older.
 */
async function appendAfter<State, Event extends DomainEvent>(
  store: EventStore,
  streamName: string,
  decider: Pick<Decider<unknown, State, Event>, 'evolve'>,
  decidedOn: { state: State; revision: bigint | undefined },
  events: readonly Event[],
  options: CommandOptions<Event>,
): Promise<{ appended: AppendResult; next: State; landed: boolean }> {
  const appended = await store.appendToStream(streamName, newEvents(events, options), { expectedRevision: decidedOn.revision ?? 'no_stream' });
  const next = events.reduce(decider.evolve, decidedOn.state);
  const landed = appended.nextExpectedRevision === (decidedOn.revision ?? -1n) + BigInt(events.length);
  // An append answered as a repeat landed there too, but as another writer's perhaps (the same
  // derived ids, other data): the state it made is read from the stream next time, not kept.
  if (landed && appended.repeated !== true) statesOf(store).keep(streamName, decider, next, appended.nextExpectedRevision);
  return { appended, next, landed };
}

function newEvents<Event extends DomainEvent>(events: readonly Event[], options: CommandOptions<Event>): NewEvent[] {
  return events.map((event, index) => ({
    id: options.eventIds?.(event, index) ?? newEventId(),
    type: event.type,
    data: event.data as Record<string, unknown>,
    metadata: { ...options.metadata, schemaVersion: SCHEMA_VERSION },
  }));
}

/**
 * The one command path: handle the command, then wait until this process's read models hold its
 * events, so the caller's next read sees its own write (read-your-writes).
 */
export async function execute<Command, State, Event extends DomainEvent>(
  context: CommandContext,
  streamName: string,
  decider: Decider<Command, State, Event>,
  command: Command,
  options: CommandOptions<Event> = {},
): Promise<E.Either<Rejection, Handled<State, Event>>> {
  const outcome = await handleCommand(context.eventStore, streamName, decider, command, options);
  const position = E.isRight(outcome) ? outcome.right.appended?.position : undefined;
  if (position) {
    try {
      await context.projector.waitFor(position);
    } catch (error) {
      // The event is durable; a slow read model only delays when it shows.
      context.log.warn({ err: error }, 'read models lag behind a write');
    }
  }
  return outcome;
}
