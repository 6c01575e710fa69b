import { EventEmitter } from 'node:events';
import pg from 'pg';
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
  EventStoreUnavailableError,
  WrongExpectedRevisionError,
} from './event-store.js';
import { type PostgresTls, postgresSslOption } from '../platform/connection-security.js';
import { POSTGRES_MIGRATIONS, SCHEMA_LOCK_KEY } from './postgres-schema.js';
import { pollingSubscription } from './polling-subscription.js';
import { RowRecordedEvent, sequencePosition } from './row-recorded-event.js';

const PAGE_SIZE = 1000;
/** The channel appenders notify at commit and subscriptions listen on. */
const CHANNEL = 'spool_events';
/** Without a notification (the listening connection is away), subscriptions look again this often. */
const FALLBACK_POLL_MS = 1_000;
/** A subscription's read that fails on a lost connection is tried again after this, doubling up to 5 s. */
const READ_RETRY_MS = [100, 5_000] as const;

interface EventRow {
  position: string;
  event_id: string;
  stream_name: string;
  revision: string;
  type: string;
  data: string;
  metadata: string;
  recorded_at: string;
}

/** An event an append names that the log already holds (bigints as text). */
interface HeldEvent {
  readonly event_id: string;
  readonly stream_name: string;
  readonly revision: string;
  readonly position: string;
}

/** An append spool_append_group wrote: its last revision and position. */
type Written = { readonly revision: string; readonly position: string };
/** What spool_append_group says of each append of a group, in order. */
type GroupOutcome = Written | { readonly found: readonly HeldEvent[] } | { readonly wrong: string };

interface QueuedAppend {
  readonly streamName: string;
  readonly events: readonly NewEvent[];
  readonly expected: ExpectedRevision;
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

// Numbers, JSON and bigints come back as the text PostgreSQL sent: positions and revisions are
// made bigints here, and an event's data is parsed only when a reader asks for it.
const RAW_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) => (oid === 20 || oid === 114 || oid === 3802 ? (value: string) => value : pg.types.getTypeParser(oid, format as never))) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * The event store on PostgreSQL (EVENTSTORE_URL=postgres://…). One table, `spool_events`, whose
 * `position` is the global order; the schema is made and migrated by Spool itself
 * (postgres-schema.ts).
 *
 * The global order is one that readers cannot skip: every appending transaction takes one
 * advisory lock and holds it to its commit, and hands out positions above the highest committed
 * one. Commits are therefore serialised, and a position becomes visible only after every lower
 * one has: a subscription that has read up to 11 never finds a 10 later (with a plain sequence,
 * a transaction that drew 10 may commit after another drew and committed 11). What it costs is
 * one commit at a time over every process, which group commit offsets: the appends a process
 * asks for while a commit is under way share the next transaction.
 *
 * Subscriptions read pages in position order and, once caught up, wait for a notification
 * (LISTEN/NOTIFY, sent by each commit that wrote) or for an append of this process, with a slow
 * poll only as the fallback for a listening connection that is away.
 */
export class PostgresEventStore implements EventStore {
  readonly kind = 'postgres';
  private readonly pool: pg.Pool;
  private readonly appended = new EventEmitter();
  private readonly subscriptions = new Set<Subscription>();
  private queued: QueuedAppend[] = [];
  private committing: Promise<void> | undefined;
  private schema: Promise<void> | undefined;
  private listener: { client: pg.Client; ready: Promise<void> } | undefined;
  private listenerRetry: NodeJS.Timeout | undefined;
  private closed = false;

  private readonly connectionString: string;
  private readonly ssl: ReturnType<typeof postgresSslOption> | undefined;

  constructor(
    connectionString: string,
    /**
     * `password`: used where the connection string names none (PGPASSWORD, from a secret). `tls`:
     * the connection's TLS (connection-security.ts), `false` for none whatever the environment's
     * PGSSLMODE says; unset, node-postgres reads the connection string's ssl parameters itself.
     */
    options: { password?: string; tls?: PostgresTls | false } = {},
  ) {
    // Put into the URL the client reads (its own password option gives way to the URL's, even an absent one).
    this.connectionString = withPassword(connectionString, options.password);
    this.ssl = options.tls === undefined ? undefined : postgresSslOption(options.tls);
    this.pool = new pg.Pool({ connectionString: this.connectionString, types: RAW_TYPES, max: 8, ...(this.ssl !== undefined ? { ssl: this.ssl } : {}) });
    // An idle connection that the server drops is replaced at the next query; its error is not the caller's.
    this.pool.on('error', () => undefined);
    this.appended.setMaxListeners(0);
  }

  /** Makes or migrates the schema once (several processes may start at once: the migration holds a lock). */
  private ready(): Promise<void> {
    this.schema ??= this.migrate().catch((error: unknown) => {
      this.schema = undefined;
      throw unavailable(error);
    });
    return this.schema;
  }

  /** A connection of the pool for a transaction: one lost meanwhile fails the query under way, not the process. */
  private async connect(): Promise<pg.PoolClient & { done(destroy?: boolean): void }> {
    const client = await this.pool.connect();
    const ignore = () => undefined;
    client.on('error', ignore);
    return Object.assign(client, {
      done: (destroy = false) => {
        client.off('error', ignore);
        client.release(destroy);
      },
    });
  }

  private async migrate(): Promise<void> {
    const client = await this.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK_KEY]);
      await client.query('CREATE TABLE IF NOT EXISTS spool_schema (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())');
      const current = Number((await client.query<{ version: number | null }>('SELECT max(version) AS version FROM spool_schema')).rows[0]?.version ?? 0);
      if (current > POSTGRES_MIGRATIONS.length) {
        throw new Error(`the event store's schema is at version ${current}, newer than this Spool knows (${POSTGRES_MIGRATIONS.length}): run a Spool as new as the one that migrated it`);
      }
      for (let version = current + 1; version <= POSTGRES_MIGRATIONS.length; version++) {
        await client.query(POSTGRES_MIGRATIONS[version - 1]!);
        await client.query('INSERT INTO spool_schema (version) VALUES ($1)', [version]);
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.done();
    }
  }

  async appendToStream(streamName: string, events: readonly NewEvent[], options: { expectedRevision?: ExpectedRevision } = {}): Promise<AppendResult> {
    if (events.length === 0) throw new Error('appendToStream needs at least one event');
    if (this.closed) throw new Error('the event store is closed');
    if (new Set(events.map((event) => event.id)).size !== events.length) throw new Error(`stream ${streamName}: an append holds the same event id twice`);
    await this.ready();
    const expected = options.expectedRevision ?? 'any';
    return new Promise((resolve, reject) => {
      this.queued.push({ streamName, events, expected, resolve, reject });
      this.scheduleCommit();
    });
  }

  /** One group commit at a time; appends queued as one ends start the next. */
  private scheduleCommit(): void {
    if (this.committing) return;
    this.committing = this.commitQueued().finally(() => {
      this.committing = undefined;
      if (this.queued.length > 0) this.scheduleCommit();
    });
  }

  /**
   * Group commit: appends asked for while a commit is under way wait for it, then share the next
   * transaction. Each caller hears of its append only once the commit is durable; one whose
   * expected revision does not hold fails alone. A transaction that fails as a whole (the
   * connection lost, the server restarted) fails every append in it with that error: none of it
   * was committed, unless the commit itself was cut off, and then the caller's retry (the same
   * event ids) is answered as the first append (idempotent append): never lost, never doubled.
   */
  private async commitQueued(): Promise<void> {
    // Appends of the same turn of the event loop join the first.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.queued.length > 0) {
      const group = this.queued;
      this.queued = [];
      await this.commitGroup(group);
    }
  }

  /**
   * One statement, one round trip (spool_append_group, postgres-schema.ts versions 2 to 4): under the
   * append lock it checks and writes every append of the group, notifies, and commits as it ends.
   */
  private async commitGroup(group: readonly QueuedAppend[]): Promise<void> {
    const appends = `[${group.map((append) => `{"stream":${JSON.stringify(append.streamName)},"expected":${JSON.stringify(typeof append.expected === 'bigint' ? append.expected.toString() : append.expected)},"events":[${append.events.map(eventJson).join(',')}]}`).join(',')}]`;
    let outcomes: GroupOutcome[];
    try {
      // Named: each connection parses and plans it once (about 70 µs an append less than unnamed).
      const { rows } = await this.pool.query<{ outcomes: string }>({ name: 'spool_append_group', text: 'SELECT spool_append_group($1::json, $2::bigint) AS outcomes', values: [appends, String(Date.now())] });
      outcomes = JSON.parse(rows[0]!.outcomes) as GroupOutcome[];
    } catch (error) {
      const failure = unavailable(error);
      for (const append of group) append.reject(failure);
      return;
    }
    // The newest position written (the group's positions rise append by append): this process's
    // subscriptions read it now, and ignore the server's echo of it.
    const newest = outcomes.findLast((outcome): outcome is Written => 'revision' in outcome);
    if (newest) this.appended.emit('appended', sequencePosition(BigInt(newest.position)));
    group.forEach((append, index) => {
      const outcome = outcomes[index]!;
      try {
        if ('revision' in outcome) append.resolve({ nextExpectedRevision: BigInt(outcome.revision), position: sequencePosition(BigInt(outcome.position)), repeated: false });
        else if ('found' in outcome) append.resolve(replayedAppend(append.streamName, append.events.map((event) => event.id), outcome.found));
        else append.reject(new WrongExpectedRevisionError(append.streamName, append.expected, outcome.wrong === 'no_stream' ? 'no_stream' : BigInt(outcome.wrong)));
      } catch (error) {
        append.reject(error);
      }
    });
  }

  async *readStream(streamName: string, options: { fromRevision?: bigint } = {}): AsyncIterable<RecordedEvent> {
    await this.ready();
    let from = options.fromRevision ?? 0n;
    for (;;) {
      const { rows } = await this.pool
        .query<EventRow>('SELECT position, event_id, stream_name, revision, type, data, metadata, recorded_at FROM spool_events WHERE stream_name = $1 AND revision >= $2 ORDER BY revision LIMIT $3', [
          streamName,
          String(from),
          PAGE_SIZE,
        ])
        .catch((error: unknown) => Promise.reject(unavailable(error)));
      for (const row of rows) yield new RowRecordedEvent(row);
      if (rows.length < PAGE_SIZE) return;
      from = BigInt(rows[rows.length - 1]!.revision) + 1n;
    }
  }

  async readAll(options: { after?: Position; maxCount: number }): Promise<RecordedEvent[]> {
    await this.ready();
    const { rows } = await this.pool
      .query<EventRow>('SELECT position, event_id, stream_name, revision, type, data, metadata, recorded_at FROM spool_events WHERE position > $1 ORDER BY position LIMIT $2', [
        String(options.after?.commit ?? 0n),
        options.maxCount,
      ])
      .catch((error: unknown) => Promise.reject(unavailable(error)));
    return rows.map((row) => new RowRecordedEvent(row));
  }

  async headPosition(): Promise<Position | undefined> {
    await this.ready();
    const head = (await this.pool.query<{ head: string | null }>('SELECT max(position) AS head FROM spool_events').catch((error: unknown) => Promise.reject(unavailable(error)))).rows[0]?.head ?? null;
    return head === null ? undefined : sequencePosition(BigInt(head));
  }

  subscribeToAll(options: { after?: Position }, handler: EventBatchHandler): Subscription {
    this.listen();
    const subscription: Subscription = pollingSubscription({
      after: options.after,
      read: (after) => this.readAll({ ...(after ? { after } : {}), maxCount: PAGE_SIZE }),
      pageSize: PAGE_SIZE,
      handler,
      appended: this.appended,
      // Notifications wake it; this only while the listening connection is away.
      idleMs: FALLBACK_POLL_MS,
      retryable: isConnectionError,
      retryMs: READ_RETRY_MS,
      onStop: () => this.subscriptions.delete(subscription),
    });
    this.subscriptions.add(subscription);
    return subscription;
  }

  /** One connection LISTENs for the commits of every process; made again when it is lost. */
  private listen(): void {
    if (this.listener || this.closed) return;
    const client = new pg.Client({ connectionString: this.connectionString, ...(this.ssl !== undefined ? { ssl: this.ssl } : {}) });
    const again = () => {
      if (this.listener?.client !== client) return;
      this.listener = undefined;
      client.end().catch(() => undefined);
      // Meanwhile subscriptions fall back to polling.
      if (!this.closed && this.subscriptions.size > 0) this.listenerRetry ??= setTimeout(() => ((this.listenerRetry = undefined), this.listen()), FALLBACK_POLL_MS);
    };
    // The payload is the newest position the commit wrote (schema version 5; empty before it: read then).
    client.on('notification', (message) => this.appended.emit('appended', /^\d+$/.test(message.payload ?? '') ? sequencePosition(BigInt(message.payload!)) : undefined));
    client.on('error', again);
    client.on('end', again);
    const ready = client
      .connect()
      .then(() => client.query(`LISTEN ${CHANNEL}`))
      .then(() => {
        // Whatever was committed while nobody listened is read now.
        this.appended.emit('appended');
      })
      .catch(again);
    this.listener = { client, ready };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.subscriptions].map((subscription) => subscription.stop()));
    // Appends asked for before close are committed, not lost with the pool.
    while (this.committing) await this.committing;
    clearTimeout(this.listenerRetry);
    const listener = this.listener;
    this.listener = undefined;
    if (listener) await listener.client.end().catch(() => undefined);
    await this.pool.end();
  }
}

/** The connection string with `password` where it names none. */
function withPassword(connectionString: string, password: string | undefined): string {
  if (password === undefined) return connectionString;
  const url = new URL(connectionString);
  if (url.password || !url.username) return connectionString;
  url.password = encodeURIComponent(password);
  return url.toString();
}

/** The same append sent again (a retry, a redelivered message): answered as the first time. */
function replayedAppend(streamName: string, ids: readonly string[], found: readonly HeldEvent[]): AppendResult {
  const byId = new Map(found.map((row) => [row.event_id, row]));
  const rows = ids.map((id) => byId.get(id));
  const sameAppend = rows.every((row, index) => row !== undefined && row.stream_name === streamName && (index === 0 || BigInt(row.revision) === BigInt(rows[index - 1]!.revision) + 1n));
  if (!sameAppend) throw new IdempotencyConflictError(streamName, found.map((row) => row.event_id));
  const last = rows[rows.length - 1]!;
  return { nextExpectedRevision: BigInt(last.revision), position: sequencePosition(BigInt(last.position)), repeated: true };
}

/** A connection's error as EventStoreUnavailableError (the cause kept); any other error as it is. */
function unavailable(error: unknown): unknown {
  if (error instanceof EventStoreUnavailableError || !isConnectionError(error)) return error;
  return new EventStoreUnavailableError(error instanceof Error ? error.message : String(error), { cause: error });
}

/** Errors of a connection that was lost or refused, or of a server shutting down: worth trying again. */
function isConnectionError(error: unknown): boolean {
  if (error instanceof EventStoreUnavailableError) return true;
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'string') return error instanceof Error && /Connection terminated|connect|ECONN|timeout/i.test(error.message);
  return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code.startsWith('ECONN') || code === 'ETIMEDOUT' || code === 'EPIPE';
}

/**
 * An event as the append function takes it. Data written as JSON already (a batch line's outcome,
 * its body spliced in as the engine's text) goes in as it is: the column keeps JSON as written,
 * and its readers rely on the body coming last (lineOutcomeFields).
 */
function eventJson(event: NewEvent): string {
  const data = event.serializedData ?? JSON.stringify(event.data);
  return `{"id":${JSON.stringify(event.id)},"type":${JSON.stringify(event.type)},"data":${data},"metadata":${JSON.stringify(event.metadata)}}`;
}
