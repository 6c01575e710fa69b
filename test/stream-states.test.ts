import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { type CommandContext, execute, loadState } from '../src/application/command-handler.js';
import { StreamStates } from '../src/application/stream-states.js';
import type { Decider } from '../src/domain/decider.js';
import { reject } from '../src/domain/rejection.js';
import type { EventStore } from '../src/event-store/event-store.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { tempDir } from './support/service.js';

type Counted = { type: 'Counted'; data: { by: string } };
interface Tally {
  readonly count: number;
  readonly by: readonly string[];
}
const tallyDecider: Decider<{ by: string }, Tally, Counted> = {
  decide: (command) => E.right([{ type: 'Counted', data: { by: command.by } }]),
  evolve: (state, event) => ({ count: state.count + 1, by: [...state.by, event.data.by] }),
  initialState: { count: 0, by: [] },
};

/** A real store, its stream reads counted: how many events each load read from the log, and how many reads. */
function countingReads(store: EventStore): { store: EventStore; eventsRead: () => number; reads: () => number } {
  let read = 0;
  let reads = 0;
  const counted = Object.create(store) as EventStore;
  counted.readStream = async function* (streamName, options) {
    reads += 1;
    for await (const event of store.readStream(streamName, options)) {
      read += 1;
      yield event;
    }
  };
  return { store: counted, eventsRead: () => read, reads: () => reads };
}

const context = (eventStore: EventStore): CommandContext => ({
  eventStore,
  projector: { waitFor: async () => undefined },
  log: { warn: () => undefined },
});

describe('states kept between commands', () => {
  it('reads only the events after a kept state, and folds in what another process appended meanwhile', async () => {
    const path = join(tempDir('stream-states'), 'events.sqlite');
    const here = new SqliteEventStore(path);
    const other = new SqliteEventStore(path);
    const { store, eventsRead } = countingReads(here);
    const stream = `batch-${randomUUID()}`;
    for (let n = 0; n < 10; n++) expect(E.isRight(await execute(context(store), stream, tallyDecider, { by: 'here' }))).toBe(true);
    // Ten commands, each reading what the one before appended at most: not 0 + 1 + ... + 9.
    expect(eventsRead()).toBe(0);
    expect((await loadState(store, stream, tallyDecider)).state.count).toBe(10);
    expect(eventsRead()).toBe(0);

    // Another process's append is read, once, on top of the kept state.
    await other.appendToStream(stream, [{ id: randomUUID(), type: 'Counted', data: { by: 'other' }, metadata: { schemaVersion: 1 } }], { expectedRevision: 9n });
    const loaded = await loadState(store, stream, tallyDecider);
    expect(loaded).toEqual({ state: { count: 11, by: [...Array(10).fill('here'), 'other'] }, revision: 10n });
    expect(eventsRead()).toBe(1);

    // A command on a kept state the other process has moved past: the append's expected revision
    // refuses it, and the command decides again on the stream as it is, and keeps that.
    await other.appendToStream(stream, [{ id: randomUUID(), type: 'Counted', data: { by: 'other' }, metadata: { schemaVersion: 1 } }], { expectedRevision: 10n });
    const raced = await execute(context(store), stream, tallyDecider, { by: 'here' });
    expect(E.isRight(raced) && raced.right.state.count).toBe(13);
    expect((await loadState(here, stream, tallyDecider)).state.by.slice(-2)).toEqual(['other', 'here']);
    const fresh = new SqliteEventStore(path);
    expect((await loadState(fresh, stream, tallyDecider)).state).toEqual((await loadState(store, stream, tallyDecider)).state);
    await Promise.all([fresh.close(), other.close(), here.close()]);
  });

  it('decides on a kept state without reading the stream, and reads it where the decision appends nothing or the stream moved on', async () => {
    // At most three counts: the fourth is refused.
    const cappedDecider: Decider<{ by: string }, Tally, Counted> = {
      ...tallyDecider,
      decide: (command, state) => (state.count >= 3 ? reject('conflict', 'three at most') : E.right([{ type: 'Counted', data: { by: command.by } }])),
    };
    const path = join(tempDir('stream-states'), 'events.sqlite');
    const here = new SqliteEventStore(path);
    const other = new SqliteEventStore(path);
    const { store, reads } = countingReads(here);
    const stream = `batch-${randomUUID()}`;
    // The first command reads the (empty) stream; the second decides on the state the first kept.
    expect(E.isRight(await execute(context(store), stream, cappedDecider, { by: 'here' }))).toBe(true);
    expect(E.isRight(await execute(context(store), stream, cappedDecider, { by: 'here' }))).toBe(true);
    expect(reads()).toBe(1);
    // Another process takes the third count: the kept state (two) would allow one more, the
    // append after it is refused, and the command, decided again on the stream, is refused too.
    await other.appendToStream(stream, [{ id: randomUUID(), type: 'Counted', data: { by: 'other' }, metadata: { schemaVersion: 1 } }], { expectedRevision: 1n });
    const refused = await execute(context(store), stream, cappedDecider, { by: 'here' });
    expect(E.isLeft(refused)).toBe(true);
    expect(reads()).toBe(2);
    // A refusal on a kept state (now three) rests on the stream read again, not on the kept state alone.
    expect(E.isLeft(await execute(context(store), stream, cappedDecider, { by: 'here' }))).toBe(true);
    expect(reads()).toBe(3);
    const fresh = new SqliteEventStore(path);
    expect((await loadState(fresh, stream, cappedDecider)).state.by).toEqual(['here', 'here', 'other']);
    await Promise.all([fresh.close(), other.close(), here.close()]);
  });

  it('a command on a stream it expects new decides on the initial state without reading, and reads where the stream exists', async () => {
    // Made once: a second is refused.
    const onceDecider: Decider<{ by: string }, Tally, Counted> = {
      ...tallyDecider,
      decide: (command, state) => (state.count > 0 ? reject('conflict', 'made already') : E.right([{ type: 'Counted', data: { by: command.by } }])),
    };
    const path = join(tempDir('stream-states'), 'events.sqlite');
    const here = new SqliteEventStore(path);
    const { store, reads } = countingReads(here);
    const stream = `file-${randomUUID()}`;
    expect(E.isRight(await execute(context(store), stream, onceDecider, { by: 'first' }, { newStream: true }))).toBe(true);
    expect(reads()).toBe(0);
    // The stream is there now (files keep no state): the append expecting none is refused, and
    // the command, decided again on the stream as it is, is refused too.
    const again = await execute(context(store), stream, onceDecider, { by: 'second' }, { newStream: true });
    expect(E.isLeft(again) && again.left.kind).toBe('conflict');
    expect(reads()).toBe(1);
    expect((await loadState(here, stream, onceDecider)).state.by).toEqual(['first']);
    await here.close();
  });

  it('keeps no state for streams read once or twice (files), nor a state folded by another decider', async () => {
    const { store, eventsRead } = countingReads(new SqliteEventStore(join(tempDir('stream-states-files'), 'events.sqlite')));
    const file = `file-${randomUUID()}`;
    await execute(context(store), file, tallyDecider, { by: 'a' });
    await execute(context(store), file, tallyDecider, { by: 'b' });
    expect(eventsRead()).toBe(1);
    const batch = `batch-${randomUUID()}`;
    await execute(context(store), batch, tallyDecider, { by: 'a' });
    const otherDecider: typeof tallyDecider = { ...tallyDecider, initialState: { count: 100, by: [] } };
    expect((await loadState(store, batch, otherDecider)).state.count).toBe(101);
  });

  it('holds at most its capacity, the least recently used dropped first, and never goes back to an older revision', () => {
    const states = new StreamStates(2);
    states.keep('batch-a', tallyDecider, { count: 1, by: [] }, 0n);
    states.keep('batch-b', tallyDecider, { count: 1, by: [] }, 0n);
    expect(states.get('batch-a', tallyDecider)?.revision).toBe(0n);
    states.keep('batch-c', tallyDecider, { count: 1, by: [] }, 0n);
    expect([states.size, states.get('batch-b', tallyDecider), states.get('batch-a', tallyDecider)?.revision]).toEqual([2, undefined, 0n]);
    states.keep('batch-a', tallyDecider, { count: 3, by: [] }, 2n);
    states.keep('batch-a', tallyDecider, { count: 2, by: [] }, 1n);
    expect(states.get('batch-a', tallyDecider)).toEqual({ state: { count: 3, by: [] }, revision: 2n });
  });
});
