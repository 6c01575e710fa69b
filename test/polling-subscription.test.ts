import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { Position, RecordedEvent } from '../src/event-store/event-store.js';
import { pollingSubscription } from '../src/event-store/polling-subscription.js';
import { sequencePosition } from '../src/event-store/row-recorded-event.js';

// The subscription's reading and waiting over a log held in an array: what it reads when, counted.
// The stores' own subscriptions run the contract suite (test/support/event-store-contract.ts).

const event = (position: number): RecordedEvent => ({
  id: `e${position}`,
  type: 'Noted',
  data: { position },
  metadata: { schemaVersion: 1 },
  streamName: 'notes-1',
  revision: BigInt(position - 1),
  position: sequencePosition(position),
  recordedAt: 0,
});

/** A log in memory, a page of at most `pageSize` after a cursor, and each read's page kept. */
function memoryLog(pageSize: number) {
  const events: RecordedEvent[] = [];
  const reads: number[] = [];
  const appended = new EventEmitter();
  /** Called inside a read (an empty one where `onEmpty`), after its page is taken and before it is returned: a commit racing the read. */
  let duringRead: { readonly action: () => void; readonly onEmpty: boolean } | undefined;
  return {
    events,
    reads,
    appended,
    pageSize,
    race(action: () => void, onEmpty = false) {
      duringRead = { action, onEmpty };
    },
    append(emitPosition: boolean): Position {
      const added = event(events.length + 1);
      events.push(added);
      appended.emit('appended', emitPosition ? added.position : undefined);
      return added.position;
    },
    read: async (after: Position | undefined) => {
      await new Promise((resolve) => setImmediate(resolve));
      const from = after === undefined ? 0 : Number(after.commit);
      const page = events.filter((held) => Number(held.position.commit) > from).slice(0, pageSize);
      reads.push(page.length);
      const race = duringRead;
      if (race && (!race.onEmpty || page.length === 0)) {
        duringRead = undefined;
        race.action();
      }
      return page;
    },
  };
}

const until = async (condition: () => boolean, ms = 2_000) => {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > ms) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};
const settle = () => new Promise((resolve) => setTimeout(resolve, 100));

describe('a polling subscription', () => {
  it('reads a commit heard of while it read at once, not at the next poll', async () => {
    for (const pageSize of [undefined, 10]) {
      const log = memoryLog(10);
      const seen: number[] = [];
      const subscription = pollingSubscription({ read: log.read, ...(pageSize ? { pageSize } : {}), appended: log.appended, idleMs: 60_000, handler: (events) => void seen.push(...events.map((held) => Number(held.position.commit))) });
      await until(() => log.reads.length === 1);
      // The commit lands after a read's page was taken and is heard of before the read returns:
      // a subscription that listened only while it waited would sleep for the whole poll. Read
      // to the end, the read that misses it is the empty one; told its page size, the short one.
      log.race(() => log.append(false), pageSize === undefined);
      log.append(false);
      await until(() => seen.length === 2);
      expect(seen).toEqual([1, 2]);
      await subscription.stop();
    }
  });

  it('hears of its own commit without reading for it again, and of a newer one with one read', async () => {
    const log = memoryLog(10);
    const seen: number[] = [];
    const subscription = pollingSubscription({ read: log.read, pageSize: log.pageSize, appended: log.appended, idleMs: 60_000, handler: (events) => void seen.push(...events.map((held) => Number(held.position.commit))) });
    await until(() => log.reads.length === 1);
    log.append(true);
    log.append(true);
    await until(() => seen.length === 2);
    await settle();
    const readsCaughtUp = log.reads.length;
    // A short page says it is caught up: no read of the nothing after it.
    expect(log.reads.at(-1)).toBeGreaterThan(0);
    // The server's echo of a commit it has read wakes nothing.
    log.appended.emit('appended', sequencePosition(2));
    log.appended.emit('appended', sequencePosition(1));
    await settle();
    expect(log.reads.length).toBe(readsCaughtUp);
    // A commit past it is read, once.
    log.append(true);
    await until(() => seen.length === 3);
    await settle();
    expect(log.reads.length).toBe(readsCaughtUp + 1);
    expect(seen).toEqual([1, 2, 3]);
    await subscription.stop();
  });

  it('reads full pages one after the other, and a commit heard of without its position once', async () => {
    const log = memoryLog(2);
    for (let position = 1; position <= 5; position++) log.events.push(event(position));
    const seen: number[] = [];
    const subscription = pollingSubscription({ read: log.read, pageSize: log.pageSize, appended: log.appended, idleMs: 60_000, handler: (events) => void seen.push(...events.map((held) => Number(held.position.commit))) });
    await until(() => seen.length === 5);
    await settle();
    // Two full pages and a short one: caught up.
    expect(log.reads).toEqual([2, 2, 1]);
    log.appended.emit('appended');
    await until(() => log.reads.length === 4);
    await settle();
    expect(log.reads).toEqual([2, 2, 1, 0]);
    await subscription.stop();
  });

  it('without a page size, reads until a page is empty (a page may be short of what is readable)', async () => {
    const log = memoryLog(10);
    log.events.push(event(1));
    const seen: number[] = [];
    const subscription = pollingSubscription({ read: log.read, appended: log.appended, idleMs: 60_000, handler: (events) => void seen.push(...events.map((held) => Number(held.position.commit))) });
    await until(() => log.reads.length === 2);
    await settle();
    expect(log.reads).toEqual([1, 0]);
    await subscription.stop();
  });

  it('reads again after a wake that came while it read, and polls when it hears nothing', async () => {
    const log = memoryLog(10);
    const subscription = pollingSubscription({ read: log.read, pageSize: log.pageSize, appended: log.appended, idleMs: 60_000, handler: () => undefined });
    log.race(() => subscription.wake());
    await until(() => log.reads.length === 2);
    await settle();
    expect(log.reads.length).toBe(2);
    await subscription.stop();

    const polled = memoryLog(10);
    const polling = pollingSubscription({ read: polled.read, pageSize: polled.pageSize, appended: polled.appended, idleMs: 20, handler: () => undefined });
    await until(() => polled.reads.length >= 4);
    await polling.stop();
    // Stopped, it no longer listens.
    expect(polled.appended.listenerCount('appended')).toBe(0);
  });
});
