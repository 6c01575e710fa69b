import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type EventStore,
  type NewEvent,
  type RecordedEvent,
  type Subscription,
  IdempotencyConflictError,
  WrongExpectedRevisionError,
  comparePositions,
} from '../../src/event-store/event-store.js';

const event = (type: string, data: Record<string, unknown> = {}, id = randomUUID()): NewEvent => ({
  id,
  type,
  data,
  metadata: { schemaVersion: 1, correlationId: 'contract' },
});

async function collect(iterable: AsyncIterable<RecordedEvent>): Promise<RecordedEvent[]> {
  const events: RecordedEvent[] = [];
  for await (const recorded of iterable) events.push(recorded);
  return events;
}

async function until(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * What every event store adapter must do. Streams are named afresh for each test, so the suite
 * also runs against a shared server that holds other data.
 */
export function eventStoreContract(name: string, open: () => Promise<EventStore>, close?: () => Promise<void>): void {
  describe(`event store contract: ${name}`, () => {
    let store: EventStore;
    const stream = (label: string) => `contract_${label}-${randomUUID().replace(/-/g, '')}`;

    beforeAll(async () => {
      store = await open();
    });
    afterAll(async () => {
      await store.close();
      await close?.();
    });

    it('appends to a new stream and reads it back in order with every field', async () => {
      const name = stream('read');
      const first = event('Happened', { n: 1, nested: { text: 'é ✓' } });
      const second = event('Happened', { n: 2 });
      const result = await store.appendToStream(name, [first, second], { expectedRevision: 'no_stream' });
      expect(result.nextExpectedRevision).toBe(1n);

      const events = await collect(store.readStream(name));
      expect(events.map((e) => [e.id, e.type, e.data, e.revision, e.streamName])).toEqual([
        [first.id, 'Happened', { n: 1, nested: { text: 'é ✓' } }, 0n, name],
        [second.id, 'Happened', { n: 2 }, 1n, name],
      ]);
      expect(events[0]!.metadata).toMatchObject({ schemaVersion: 1, correlationId: 'contract' });
      expect(comparePositions(events[0]!.position, events[1]!.position)).toBeLessThan(0);
      expect(comparePositions(events[1]!.position, result.position)).toBe(0);
      expect(events[0]!.recordedAt).toBeGreaterThan(Date.now() - 600_000);
    });

    it('keeps data written as JSON text with its keys in the order written, alone or in a group', async () => {
      // A line's outcome is written as text with the engine's body spliced in last, and its readers
      // rely on that order: a store that sorted keys (PostgreSQL's jsonb would) breaks them.
      const written = (n: number) => ({ zeta: n, alpha: { yes: 2, beta: [3, { q: 'x"y' }] }, body: { k: 'v' } });
      const asText = (n: number) => `{"zeta":${n},"alpha":{"yes":2,"beta":[3,{"q":"x\\"y"}]},"body":{"k": "v"}}`;
      const withText = (n: number): NewEvent => ({ ...event('Answered', written(n)), serializedData: asText(n) });
      const alone = stream('order-alone');
      const group = stream('order-group');
      await store.appendToStream(alone, [withText(0)]);
      await store.appendToStream(group, [withText(1), withText(2), withText(3)]);
      const read = [...(await collect(store.readStream(alone))), ...(await collect(store.readStream(group)))];
      expect(read.map((e) => e.data)).toEqual([0, 1, 2, 3].map(written));
      for (const e of read) {
        expect(Object.keys(e.data)).toEqual(['zeta', 'alpha', 'body']);
        expect(Object.keys(e.data.alpha as object)).toEqual(['yes', 'beta']);
      }
    });

    it('reads a stream from a revision, and an unknown stream as empty', async () => {
      const name = stream('from');
      await store.appendToStream(name, [event('A'), event('B'), event('C')]);
      expect((await collect(store.readStream(name, { fromRevision: 1n }))).map((e) => e.type)).toEqual(['B', 'C']);
      expect(await collect(store.readStream(stream('missing')))).toEqual([]);
    });

    it('appends with the expected revision and refuses a stale one with a typed error', async () => {
      const name = stream('optimistic');
      await store.appendToStream(name, [event('A')], { expectedRevision: 'no_stream' });
      await store.appendToStream(name, [event('B')], { expectedRevision: 0n });
      const stale = store.appendToStream(name, [event('C')], { expectedRevision: 0n });
      await expect(stale).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      await expect(stale).rejects.toMatchObject({ streamName: name, expected: 0n, actual: 1n });
      expect((await collect(store.readStream(name))).map((e) => e.type)).toEqual(['A', 'B']);
    });

    it("honours 'no_stream' and 'stream_exists'", async () => {
      const name = stream('exists');
      await expect(store.appendToStream(name, [event('A')], { expectedRevision: 'stream_exists' })).rejects.toMatchObject({
        actual: 'no_stream',
      });
      await store.appendToStream(name, [event('A')], { expectedRevision: 'no_stream' });
      await expect(store.appendToStream(name, [event('B')], { expectedRevision: 'no_stream' })).rejects.toBeInstanceOf(
        WrongExpectedRevisionError,
      );
      await store.appendToStream(name, [event('B')], { expectedRevision: 'stream_exists' });
      expect((await collect(store.readStream(name))).length).toBe(2);
    });

    it('lets exactly one of two racing appends with the same expected revision win', async () => {
      const name = stream('race');
      await store.appendToStream(name, [event('A')]);
      const outcomes = await Promise.allSettled([
        store.appendToStream(name, [event('B1')], { expectedRevision: 0n }),
        store.appendToStream(name, [event('B2')], { expectedRevision: 0n }),
      ]);
      expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
      const failure = outcomes.find((outcome) => outcome.status === 'rejected') as PromiseRejectedResult;
      expect(failure.reason).toBeInstanceOf(WrongExpectedRevisionError);
      expect((await collect(store.readStream(name))).length).toBe(2);
    });

    it('treats an append of events it already holds as done, whatever the expected revision', async () => {
      const name = stream('idempotent');
      const batch = [event('A'), event('B')];
      const first = await store.appendToStream(name, batch, { expectedRevision: 'no_stream' });
      const again = await store.appendToStream(name, batch, { expectedRevision: 'no_stream' });
      const anyAgain = await store.appendToStream(name, batch, { expectedRevision: 'any' });
      expect(again.nextExpectedRevision).toBe(first.nextExpectedRevision);
      expect(anyAgain.nextExpectedRevision).toBe(first.nextExpectedRevision);
      // Whether an append wrote or was a repeat, where the store can tell (KurrentDB cannot always).
      const told = store.kind === 'eventstoredb' ? [first.repeated !== true, again.repeated !== false, anyAgain.repeated !== false] : [first.repeated, again.repeated, anyAgain.repeated];
      expect(told).toEqual(store.kind === 'eventstoredb' ? [true, true, true] : [false, true, true]);
      expect(comparePositions(anyAgain.position, first.position)).toBe(0);
      await store.appendToStream(name, [event('C')]);
      await store.appendToStream(name, [batch[1]!], { expectedRevision: 'any' }).catch(() => undefined);
      expect((await collect(store.readStream(name))).map((e) => e.type)).toEqual(['A', 'B', 'C']);
    });

    it('refuses an append that repeats only some of the events it holds', async () => {
      const name = stream('partial');
      const a = event('A');
      await store.appendToStream(name, [a]);
      await expect(store.appendToStream(name, [a, event('B')], { expectedRevision: 'any' })).rejects.toBeInstanceOf(
        IdempotencyConflictError,
      );
      expect((await collect(store.readStream(name))).map((e) => e.type)).toEqual(['A']);
    });

    it('reads the whole log strictly after a position, across streams, in append order', async () => {
      const one = stream('all1');
      const two = stream('all2');
      const start = await store.appendToStream(one, [event('Start')]);
      await store.appendToStream(two, [event('X')]);
      await store.appendToStream(one, [event('Y')]);
      await store.appendToStream(two, [event('Z')]);
      const ours = new Set([one, two]);
      const after = (await store.readAll({ after: start.position, maxCount: 10_000 })).filter((e) => ours.has(e.streamName));
      expect(after.map((e) => e.type)).toEqual(['X', 'Y', 'Z']);
      for (let index = 1; index < after.length; index++) {
        expect(comparePositions(after[index - 1]!.position, after[index]!.position)).toBeLessThan(0);
      }
      const head = await store.headPosition();
      expect(head && comparePositions(head, after[after.length - 1]!.position)).toBeGreaterThanOrEqual(0);
      const page = await store.readAll({ after: start.position, maxCount: 2 });
      expect(page).toHaveLength(2);
    });

    it('delivers past then live events to a catch-up subscription, and resumes after a checkpoint', async () => {
      const name = stream('subscribe');
      const before = await store.appendToStream(name, [event('Past1'), event('Past2')]);
      const seen: RecordedEvent[] = [];
      const subscription = store.subscribeToAll({}, (events) => {
        seen.push(...events.filter((e) => e.streamName === name));
      });
      await until(() => seen.length === 2);
      await store.appendToStream(name, [event('Live')]);
      await until(() => seen.length === 3);
      await subscription.stop();
      expect(seen.map((e) => e.type)).toEqual(['Past1', 'Past2', 'Live']);

      const resumed: RecordedEvent[] = [];
      const second = store.subscribeToAll({ after: before.position }, (events) => {
        resumed.push(...events.filter((e) => e.streamName === name));
      });
      await until(() => resumed.length === 1);
      await second.stop();
      expect(resumed.map((e) => e.type)).toEqual(['Live']);
    });

    /**
     * A subscription from the log's head that collects the types of `name`'s events, each page
     * handled in `handleMs` (after `onPage`), and counts the handler calls running at once.
     */
    const slowSubscription = async (name: string, handleMs: number, onPage: (subscription: Subscription) => void = () => undefined) => {
      const mark = await store.headPosition();
      const watched = { seen: [] as string[], maxRunning: 0 };
      let running = 0;
      const subscription: Subscription = store.subscribeToAll(mark ? { after: mark } : {}, async (events) => {
        running += 1;
        watched.maxRunning = Math.max(watched.maxRunning, running);
        onPage(subscription);
        await new Promise((resolve) => setTimeout(resolve, handleMs));
        watched.seen.push(...events.filter((e) => e.streamName === name).map((e) => e.type));
        running -= 1;
      });
      return { subscription, watched };
    };

    it('waits for a slow handler before delivering the next batch', async () => {
      const name = stream('backpressure');
      const { subscription, watched } = await slowSubscription(name, 20);
      for (const type of ['A', 'B', 'C', 'D']) await store.appendToStream(name, [event(type)]);
      await until(() => watched.seen.length === 4);
      await subscription.stop();
      expect(watched.seen).toEqual(['A', 'B', 'C', 'D']);
      expect(watched.maxRunning).toBe(1);
    });

    it('delivers every event once and in order however often a subscription is woken, while reading or waiting', async () => {
      const name = stream('wake');
      // Woken while it handles a page, too.
      const { subscription, watched } = await slowSubscription(name, 5, (handling) => handling.wake());
      const types = Array.from({ length: 12 }, (_, index) => `W${index}`);
      for (const type of types) {
        await store.appendToStream(name, [event(type)]);
        subscription.wake();
        subscription.wake();
      }
      await until(() => watched.seen.length === types.length);
      // Caught up: more wakes read nothing new.
      for (let index = 0; index < 5; index++) subscription.wake();
      await new Promise((resolve) => setTimeout(resolve, 100));
      await subscription.stop();
      expect(watched.seen).toEqual(types);
      expect(watched.maxRunning).toBe(1);
    });
  });
}
