import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fdatasync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../src/event-store/event-store.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { packageRoot } from '../src/platform/package-root.js';
import { waitUntil } from './support/batch-helpers.js';
import { eventStoreContract } from './support/event-store-contract.js';
import { tempDir } from './support/service.js';

eventStoreContract('embedded SQLite', async () => new SqliteEventStore(join(tempDir('events'), 'events.sqlite')));

describe('the embedded event store on disk', () => {
  it('keeps every appended event across a close and a reopen, positions and all', async () => {
    const path = join(tempDir('events-durable'), 'events.sqlite');
    const first = new SqliteEventStore(path);
    const appended = await first.appendToStream('durable-1', [
      { id: randomUUID(), type: 'Happened', data: { n: 1 }, metadata: { schemaVersion: 1 } },
      { id: randomUUID(), type: 'Happened', data: { n: 2 }, metadata: { schemaVersion: 1 } },
    ]);
    await first.close();
    const reopened = new SqliteEventStore(path);
    const events = await reopened.readAll({ maxCount: 10 });
    expect(events.map((event) => event.data)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(await reopened.headPosition()).toEqual(appended.position);
    await expect(reopened.appendToStream('durable-1', [{ id: randomUUID(), type: 'Happened', data: {}, metadata: { schemaVersion: 1 } }], { expectedRevision: 0n })).rejects.toMatchObject({ actual: 1n });
    await reopened.close();
  });

  it('commits the appends asked for in one turn together, each standing or failing on its own', async () => {
    const path = join(tempDir('events-group'), 'events.sqlite');
    const store = new SqliteEventStore(path);
    const event = (type: string) => ({ id: randomUUID(), type, data: {}, metadata: { schemaVersion: 1 } });
    await store.appendToStream('group-b', [event('B0')]);
    const repeated = event('A1');
    const appends = [
      store.appendToStream('group-a', [event('A0')], { expectedRevision: 'no_stream' }),
      store.appendToStream('group-b', [event('B1')], { expectedRevision: 'no_stream' }),
      store.appendToStream('group-a', [repeated], { expectedRevision: 0n }),
      store.appendToStream('group-a', [repeated], { expectedRevision: 0n }),
      store.appendToStream('group-c', [event('C0'), event('C1')]),
    ];
    const results = await Promise.allSettled(appends);
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ name: 'WrongExpectedRevisionError' });
    // The repeat is answered as the first (idempotent) and says it was one; one commit holds all of them.
    expect((results[3] as PromiseFulfilledResult<unknown>).value).toEqual({ ...(results[2] as PromiseFulfilledResult<object>).value, repeated: true });
    const all = await store.readAll({ maxCount: 10 });
    expect(all.map((recorded) => recorded.type)).toEqual(['B0', 'A0', 'A1', 'C0', 'C1']);
    expect(new Set(all.slice(1).map((recorded) => recorded.recordedAt)).size).toBe(1);
    // A store closed with appends asked for commits them first.
    const late = store.appendToStream('group-d', [event('D0')]);
    await store.close();
    await expect(late).resolves.toMatchObject({ nextExpectedRevision: 0n });
    const reopened = new SqliteEventStore(path);
    expect((await reopened.readAll({ maxCount: 10 })).map((recorded) => recorded.type)).toEqual(['B0', 'A0', 'A1', 'C0', 'C1', 'D0']);
    await reopened.close();
  });

  it('finds an event recorded before by its unique id: the append is undone, and the others in its commit stand', async () => {
    const store = new SqliteEventStore(join(tempDir('events-duplicate'), 'events.sqlite'));
    const event = (type: string) => ({ id: randomUUID(), type, data: {}, metadata: { schemaVersion: 1 } });
    const held = event('H0');
    const first = await store.appendToStream('dup-h', [held]);
    const twice = event('T0');
    const appends = [
      store.appendToStream('dup-t', [twice, twice]),
      store.appendToStream('dup-h', [event('H1'), held], { expectedRevision: 0n }),
      store.appendToStream('dup-h', [held], { expectedRevision: 'no_stream' }),
      store.appendToStream('dup-o', [event('O0')]),
    ];
    const results = await Promise.allSettled(appends);
    expect(results.map((result) => result.status)).toEqual(['rejected', 'rejected', 'fulfilled', 'fulfilled']);
    expect((results[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_CONSTRAINT_UNIQUE' });
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ name: 'IdempotencyConflictError' });
    expect((results[2] as PromiseFulfilledResult<unknown>).value).toEqual({ ...first, repeated: true });
    expect((await store.readAll({ maxCount: 10 })).map((recorded) => recorded.type)).toEqual(['H0', 'O0']);
    await store.close();
  });

  it('gives two subscriptions every event once and in order, sharing the pages they both read, while this process and another append', async () => {
    const path = join(tempDir('events-shared-pages'), 'events.sqlite');
    const store = new SqliteEventStore(path, { pollIntervalMs: 10 });
    const other = new SqliteEventStore(path, { pollIntervalMs: 10 });
    const event = (n: number) => ({ id: randomUUID(), type: 'Counted', data: { n }, metadata: { schemaVersion: 1 } });
    const total = 2_600;
    const seen: RecordedEvent[][] = [[], []];
    const done = [0, 1].map(
      (which) =>
        new Promise<void>((resolve) => {
          store.subscribeToAll({}, async (events) => {
            seen[which]!.push(...events);
            // The second one lags now and then, so that the two are not always at one place.
            if (which === 1 && seen[1]!.length % 3 === 0) await new Promise((wait) => setTimeout(wait, 2));
            if (seen[which]!.length >= total) resolve();
          });
        }),
    );
    for (let n = 0; n < total; n += 100) {
      const writer = n % 200 === 0 ? store : other;
      await writer.appendToStream(`counted-${n % 7}`, Array.from({ length: 100 }, (_, offset) => event(n + offset)));
    }
    await Promise.all(done);
    for (const events of seen) expect(events.map((recorded) => recorded.data.n)).toEqual(Array.from({ length: total }, (_, n) => n));
    // The same objects, read once: the data of one was parsed for both.
    const firstIds = new Map(seen[0]!.map((recorded) => [recorded.id, recorded]));
    expect(seen[1]!.filter((recorded) => firstIds.get(recorded.id) === recorded).length).toBeGreaterThan(0);
    await other.close();
    await store.close();
  });

  it("hands its own commits to its readers as it wrote them, reads another process's from the file, and lets go of its own once every subscription has read them", async () => {
    const path = join(tempDir('events-tail'), 'events.sqlite');
    const store = new SqliteEventStore(path, { pollIntervalMs: 10 });
    const other = new SqliteEventStore(path, { pollIntervalMs: 10 });
    const event = (n: number) => ({ id: randomUUID(), type: 'Counted', data: { n }, metadata: { schemaVersion: 1 } });
    // A subscription held on its first page: it has read nothing yet, so the store keeps what it commits.
    let release: (() => void) | undefined;
    const heard: number[] = [];
    const subscription = store.subscribeToAll({}, async (events) => {
      heard.push(...events.map((recorded) => recorded.data.n as number));
      if (!release) await new Promise<void>((resolve) => (release = resolve));
    });
    await store.appendToStream('own', [event(1), event(2)]);
    // Each row changed in the file behind the store's back shows where a read took it from.
    const file = new Database(path);
    const mark = () => file.prepare("UPDATE events SET data = json_set(data, '$.file', 1)").run();
    mark();
    const read = async () => (await store.readAll({ maxCount: 10 })).map((recorded) => ({ n: recorded.data.n, file: recorded.data.file === 1, position: recorded.position }));
    expect((await read()).map(({ n, file }) => [n, file])).toEqual([[1, false], [2, false]]);
    // Another process's commit after this one's: the tail, then the file for what follows it.
    await other.appendToStream('theirs', [event(3)]);
    mark();
    expect((await read()).map(({ n, file }) => [n, file])).toEqual([[1, false], [2, false], [3, true]]);
    // This process commits again after the other's: its tail starts again there, so a read from the start takes the file.
    await store.appendToStream('own', [event(4)], { expectedRevision: 1n });
    mark();
    const all = await read();
    expect(all.map(({ n, file }) => [n, file])).toEqual([[1, true], [2, true], [3, true], [4, true]]);
    expect((await store.readAll({ after: all[2]!.position, maxCount: 10 })).map((recorded) => [recorded.data.n, recorded.data.file === 1])).toEqual([[4, false]]);
    // Read through by the subscription: the store lets go of its rows, and reads them from the file.
    await waitUntil(() => release !== undefined);
    release!();
    await waitUntil(() => heard.length === 4);
    await store.appendToStream('own', [event(5)], { expectedRevision: 2n });
    await waitUntil(() => heard.length === 5);
    mark();
    expect((await read()).map(({ n, file }) => [n, file])).toEqual([[1, true], [2, true], [3, true], [4, true], [5, true]]);
    expect(heard).toEqual([1, 2, 3, 4, 5]);
    file.close();
    await subscription.stop();
    await other.close();
    await store.close();
  });

  it("reads a page of any size that begins in its own commits and runs on in another process's", async () => {
    const path = join(tempDir('events-tail-long'), 'events.sqlite');
    const store = new SqliteEventStore(path, { pollIntervalMs: 10 });
    // A subscription held on its first page, having read nothing yet: the store keeps its own commits for it.
    let release: (() => void) | undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const subscription = store.subscribeToAll({}, () => held);
    await store.appendToStream('own', [{ id: randomUUID(), type: 'Counted', data: { n: 0 }, metadata: { schemaVersion: 1 } }]);
    // Another process commits 200,000 events after it, straight into the file.
    const file = new Database(path);
    const insert = file.prepare('INSERT INTO events (event_id, stream_name, revision, type, data, metadata, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
    file.transaction(() => {
      for (let n = 1; n <= 200_000; n++) insert.run(randomUUID(), 'theirs', n - 1, 'Counted', `{"n":${n}}`, '{"schemaVersion":1}', Date.now());
    })();
    file.close();
    const page = await store.readAll({ maxCount: 250_000 });
    expect(page).toHaveLength(200_001);
    expect([page[0]!.data.n, page[1]!.data.n, page[200_000]!.data.n]).toEqual([0, 1, 200_000]);
    release!();
    await subscription.stop();
    await store.close();
  });

  it("reads another process's event when woken, not at its next poll", async () => {
    const path = join(tempDir('events-wake'), 'events.sqlite');
    // A poll a minute apart, and other processes' commits not listened for: only wake() can bring the other connection's event in time.
    const store = new SqliteEventStore(path, { pollIntervalMs: 60_000, watchOtherProcesses: false });
    const other = new SqliteEventStore(path, { pollIntervalMs: 60_000, watchOtherProcesses: false });
    const seen: number[] = [];
    const subscription = store.subscribeToAll({}, async (events) => {
      seen.push(...events.map((recorded) => recorded.data.n as number));
    });
    await store.appendToStream('woken', [{ id: randomUUID(), type: 'Counted', data: { n: 1 }, metadata: { schemaVersion: 1 } }]);
    await waitUntil(() => seen.length === 1);
    await other.appendToStream('woken', [{ id: randomUUID(), type: 'Counted', data: { n: 2 }, metadata: { schemaVersion: 1 } }]);
    // Caught up and waiting: the other connection's append does not reach it by itself.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(seen).toEqual([1]);
    subscription.wake();
    await waitUntil(() => seen.length === 2);
    expect(seen).toEqual([1, 2]);
    await other.close();
    await store.close();
  });

  it("hears another process's commit as it happens, not at its next poll, and its own commits do not wake it twice", async () => {
    const path = join(tempDir('events-heard'), 'events.sqlite');
    const store = new SqliteEventStore(path, { pollIntervalMs: 60_000 });
    const pages: number[][] = [];
    const subscription = store.subscribeToAll({}, async (events) => {
      pages.push(events.map((recorded) => recorded.data.n as number));
    });
    expect(store.hearsOtherProcesses).toBe(true);
    const reads = countReads(store);
    await store.appendToStream('heard', [{ id: randomUUID(), type: 'Counted', data: { n: 1 }, metadata: { schemaVersion: 1 } }]);
    await waitUntil(() => pages.flat().length === 1);
    // Its own commit is heard through the marker as well: told apart, it costs no second read.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(reads()).toBe(2);
    // A real second process appends and exits; the poll is a minute away.
    const started = Date.now();
    execFileSync(process.execPath, ['--input-type=module', '-e', ANOTHER_PROCESS_APPENDS], { env: { EVENTS_FILE: path, N: '2' } });
    await waitUntil(() => pages.flat().length === 2, 5_000);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(pages.flat()).toEqual([1, 2]);
    await subscription.stop();
    await store.close();
  });

  it('answers an append, and hands it to its own subscriptions, only once the write-ahead log is flushed to disk', async () => {
    const path = join(tempDir('events-flush'), 'events.sqlite');
    const held: Array<() => void> = [];
    // The real flush, held until the test lets it go.
    const store = new SqliteEventStore(path, { fileSync: (fd, done) => held.push(() => fdatasync(fd, done)) });
    const event = (type: string) => ({ id: randomUUID(), type, data: {}, metadata: { schemaVersion: 1 } });
    const seen: string[] = [];
    store.subscribeToAll({}, async (events) => {
      seen.push(...events.map((recorded) => recorded.type));
    });
    const answered: string[] = [];
    const first = store.appendToStream('flush-a', [event('A')]).then(() => answered.push('A'));
    await waitUntil(() => held.length === 1);
    // Committed (another connection reads it), but neither told nor read here until it is on disk.
    const reader = new Database(path, { readonly: true });
    const count = () => (reader.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n;
    expect(count()).toBe(1);
    const second = store.appendToStream('flush-b', [event('B')]).then(() => answered.push('B'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(count()).toBe(2);
    // B waits for a flush of its own: the one in flight may have begun before B was written.
    expect({ flushes: held.length, answered, seen }).toEqual({ flushes: 1, answered: [], seen: [] });
    held.shift()!();
    await first;
    await waitUntil(() => held.length === 1);
    await waitUntil(() => seen.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect({ answered, seen }).toEqual({ answered: ['A'], seen: ['A'] });
    // Closing waits for the flush in flight, and loses nothing.
    const closed = store.close();
    held.shift()!();
    await Promise.all([second, closed]);
    expect(answered).toEqual(['A', 'B']);
    reader.close();
    const reopened = new SqliteEventStore(path);
    expect((await reopened.readAll({ maxCount: 10 })).map((recorded) => recorded.type)).toEqual(['A', 'B']);
    await reopened.close();
  });

  it("hands on another process's commit only once this process has flushed the log through it", async () => {
    const path = join(tempDir('events-flush-other'), 'events.sqlite');
    const held: Array<() => void> = [];
    const reader = new SqliteEventStore(path, { pollIntervalMs: 10, fileSync: (fd, done) => held.push(() => fdatasync(fd, done)) });
    // The writer's own flush is a real one; the reader cannot know it happened.
    const writer = new SqliteEventStore(path);
    const seen: string[] = [];
    reader.subscribeToAll({}, async (events) => {
      seen.push(...events.map((recorded) => recorded.type));
    });
    await writer.appendToStream('flush-other', [{ id: randomUUID(), type: 'Elsewhere', data: {}, metadata: { schemaVersion: 1 } }]);
    await waitUntil(() => held.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(seen).toEqual([]);
    held.shift()!();
    await waitUntil(() => seen.length === 1);
    expect(seen).toEqual(['Elsewhere']);
    await writer.close();
    await reader.close();
  });

  it('fails the appends of a flush the disk refused, by name, and answers one sent again as the first time once a flush succeeds', async () => {
    const path = join(tempDir('events-flush-fails'), 'events.sqlite');
    let refuse = true;
    const store = new SqliteEventStore(path, {
      fileSync: (fd, done) => (refuse ? done(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })) : fdatasync(fd, done)),
    });
    const events = [{ id: randomUUID(), type: 'Happened', data: { n: 1 }, metadata: { schemaVersion: 1 } }];
    await expect(store.appendToStream('refused-1', events, { expectedRevision: 'no_stream' })).rejects.toThrow(/event log's commit could not be flushed to disk: EIO/);
    refuse = false;
    // The commit stands in the file: sent again, the same append is answered as the first time.
    const again = await store.appendToStream('refused-1', events, { expectedRevision: 'no_stream' });
    expect(again.nextExpectedRevision).toBe(0n);
    expect((await store.readAll({ maxCount: 10 })).map((recorded) => recorded.id)).toEqual([events[0]!.id]);
    await store.close();
  });
});

/** Another process: opens the log file named by EVENTS_FILE, appends one event carrying N, closes. */
const ANOTHER_PROCESS_APPENDS = `
  import { randomUUID } from 'node:crypto';
  import { SqliteEventStore } from ${JSON.stringify(join(packageRoot, 'dist/src/event-store/sqlite-event-store.js'))};
  const store = new SqliteEventStore(process.env.EVENTS_FILE);
  await store.appendToStream('heard', [{ id: randomUUID(), type: 'Counted', data: { n: Number(process.env.N) }, metadata: { schemaVersion: 1 } }]);
  await store.close();
`;

/** Counts the store's reads of the log's pages from now on (its subscriptions' reads). */
function countReads(store: SqliteEventStore): () => number {
  const target = store as unknown as { readAllSync: (...args: unknown[]) => unknown };
  const original = target.readAllSync.bind(store);
  let count = 0;
  target.readAllSync = (...args: unknown[]) => {
    count += 1;
    return original(...args);
  };
  return () => count;
}
