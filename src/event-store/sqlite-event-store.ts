import { EventEmitter } from 'node:events';
import Database from 'better-sqlite3';
import { preparePrivateDatabaseFile } from '../platform/private-files.js';
import { pollingSubscription } from './polling-subscription.js';
import { SharedFileCommits } from './shared-file-commits.js';
import { CommittedTail } from './committed-tail.js';
import { RowRecordedEvent, sequencePosition } from './row-recorded-event.js';
import { type EventRow, SqliteStreamAppender } from './sqlite-stream-append.js';
import { type CommitToFlush, type FileSync, NO_BOUND, WriteAheadLogFlush } from './write-ahead-log-flush.js';
import {
  type AppendResult,
  type EventBatchHandler,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type Position,
  type RecordedEvent,
  type Subscription,
} from './event-store.js';

const PAGE_SIZE = 1000;

interface QueuedAppend {
  readonly streamName: string;
  readonly events: readonly NewEvent[];
  readonly expected: ExpectedRevision;
  readonly resolve: (result: AppendResult) => void;
  readonly reject: (error: unknown) => void;
}

/** A group commit that returned, its appends waiting to hear of it until its frames are on disk. */
interface CommittedGroup extends CommitToFlush {
  readonly appends: readonly QueuedAppend[];
  readonly settled: ReadonlyArray<{ result: AppendResult } | { error: unknown }>;
}

/**
 * SQLite's page cache for this connection, in KiB (a negative cache_size). better-sqlite3 builds
 * SQLite with 16 MiB per connection, which a long batch's log fills; the pages that matter (the
 * log's tail, the indexes' upper levels) fit in 2 MiB, and the rest stays in the OS's page cache,
 * a read away, without counting toward the process's memory.
 */
const PAGE_CACHE_KIB = 2048;

/**
 * The embedded event store: one SQLite file in WAL mode. An append is answered only once its
 * commit's frames are on disk, so an append that returned survives a crash, of the process or of
 * the machine. SQLite admits one writer at a time, which makes the autoincrement position a
 * gap-free commit order, also when several processes share the file.
 *
 * The write-ahead log is synced off the main thread. With synchronous=FULL, SQLite fsyncs the WAL
 * inside every commit, and the process's one thread waits out the disk (about a fifth of its time
 * when a thousand small batches move a step each). Here the connection commits with
 * synchronous=NORMAL (the frames written, not yet synced; SQLite still syncs before each
 * checkpoint), and a WriteAheadLogFlush fdatasyncs the WAL file on libuv's thread pool, as FULL
 * would have done, before the store answers the commit's appends. Commits made while a sync is in
 * flight share the next one. A subscription hands on no event that a power cut could still take
 * back: its reads of the log stop short of this process's first commit not yet flushed
 * (`readableThrough`), and a page holding another process's commits past what this process's
 * flushes have covered (`flushedThrough`) goes on once a flush of this process's, begun after the
 * read, has ended (that process's own flush has mostly made them durable already, and this one
 * finds little to write). Commands' reads of a stream do see a commit before its flush: an append
 * decided on it is answered only after a later flush, which covers both.
 */
export class SqliteEventStore implements EventStore {
  readonly kind = 'embedded';
  private readonly db: Database.Database;
  private readonly appended = new EventEmitter();
  /** Each subscription, and the position it last read after (0: from the start). */
  private readonly subscriptions = new Map<Subscription, { after: number }>();
  /** This process's last commits, for its own readers (see CommittedTail). */
  private readonly tail = new CommittedTail();
  private readonly statements;
  private readonly appender: SqliteStreamAppender;
  private queued: QueuedAppend[] = [];
  /** The page a subscription read last, for the next subscription that asks for it (readPage). */
  private lastPage: { readonly from: number; readonly maxCount: number; readonly events: readonly RecordedEvent[] } | undefined;

  /** Other processes' commits to the file, heard as they happen (SharedFileCommits). */
  private readonly commits: SharedFileCommits;
  private readonly pollIntervalMs: number;
  private readonly watchOtherProcesses: boolean;
  /** SQLite's data_version when last read: it moves only when another connection commits. */
  private dataVersion: number;

  /** What makes commits durable (undefined where the file is not in WAL mode: SQLite syncs in the commit then). */
  private readonly flush: WriteAheadLogFlush<CommittedGroup> | undefined;

  constructor(
    path: string,
    options: {
      /** How often a subscription looks for events that another process appended (the fallback where they are not heard). */
      readonly pollIntervalMs?: number;
      /** Hear other processes' commits through the file system's notifications (default); false: the poll alone. */
      readonly watchOtherProcesses?: boolean;
      /** What flushes the write-ahead log to disk (node:fs's fdatasync); a test holds it to see who waits for it. */
      readonly fileSync?: FileSync;
    } = {},
  ) {
    this.pollIntervalMs = options.pollIntervalMs ?? 50;
    this.watchOtherProcesses = options.watchOtherProcesses ?? true;
    this.commits = new SharedFileCommits(path);
    preparePrivateDatabaseFile(path);
    this.db = new Database(path);
    const walMode = this.db.pragma('journal_mode = WAL', { simple: true }) === 'wal';
    this.db.pragma(walMode ? 'synchronous = NORMAL' : 'synchronous = FULL');
    this.db.pragma('busy_timeout = 10000');
    this.db.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS events (
        position    INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id    TEXT    NOT NULL UNIQUE,
        stream_name TEXT    NOT NULL,
        revision    INTEGER NOT NULL,
        type        TEXT    NOT NULL,
        data        TEXT    NOT NULL,
        metadata    TEXT    NOT NULL,
        recorded_at INTEGER NOT NULL,
        UNIQUE (stream_name, revision)
      );
    `);
    this.appended.setMaxListeners(0);
    this.appender = new SqliteStreamAppender(this.db);
    this.statements = {
      readStream: this.db.prepare<[string, number, number], EventRow>(
        'SELECT * FROM events WHERE stream_name = ? AND revision >= ? ORDER BY revision LIMIT ?',
      ),
      readAll: this.db.prepare<[number, number, number], EventRow>(
        'SELECT * FROM events WHERE position > ? AND position <= ? ORDER BY position LIMIT ?',
      ),
      head: this.db.prepare<[], { position: number | null }>('SELECT max(position) AS position FROM events'),
      // Prepared once: read after every commit heard of, this process's own included (db.pragma()
      // compiles its statement at each call).
      dataVersion: this.db.prepare<[], number>('PRAGMA data_version').pluck(),
    };
    this.dataVersion = this.statements.dataVersion.get()!;
    // In WAL mode the store syncs the log itself, off the main thread (see the class's comment);
    // where the file system refuses WAL, SQLite syncs its rollback journal in every commit.
    this.flush = walMode
      ? new WriteAheadLogFlush<CommittedGroup>({
          walPath: `${path}-wal`,
          fileSync: options.fileSync,
          head: () => this.statements.head.get()?.position ?? 0,
          durable: (groups) => this.durable(groups),
          notDurable: (groups, error) => this.notDurable(groups, error),
        })
      : undefined;
  }

  async appendToStream(
    streamName: string,
    events: readonly NewEvent[],
    options: { expectedRevision?: ExpectedRevision } = {},
  ): Promise<AppendResult> {
    if (events.length === 0) throw new Error('appendToStream needs at least one event');
    const expected = options.expectedRevision ?? 'any';
    return new Promise((resolve, reject) => {
      this.queued.push({ streamName, events, expected, resolve, reject });
      if (this.queued.length === 1) setImmediate(() => this.commitQueued());
    });
  }

  /**
   * Group commit: the appends asked for in one turn of the event loop (the outcome groups of
   * several chunks, flushed together) share one transaction and one fsync, each in a savepoint of
   * its own, so one that fails its expected revision leaves the others in. Each caller hears of
   * its append only once the commit is durable, as when each had its own.
   */
  private commitQueued(): void {
    const queued = this.queued;
    this.queued = [];
    if (queued.length === 0) return;
    const settled: Array<{ result: AppendResult } | { error: unknown }> = [];
    let wrote = false;
    const rows: EventRow[] = [];
    this.appender.beginCommit();
    // One commit, one time: its events all carry it.
    const recordedAt = Date.now();
    try {
      this.db
        .transaction(() => {
          for (const append of queued) {
            try {
              // In a savepoint of its own (SqliteStreamAppender).
              const outcome = this.appender.append(append.streamName, append.events, append.expected, recordedAt);
              wrote ||= outcome.wrote;
              for (const row of outcome.rows) rows.push(row);
              settled.push({ result: outcome.result });
            } catch (error) {
              // SQLite may roll the whole transaction back on some errors (SQLITE_FULL, an I/O
              // error): then nothing of the group was written, and each of its appends hears that error.
              if (!this.db.inTransaction) throw error;
              settled.push({ error });
            }
          }
        })
        .immediate();
    } catch (error) {
      for (const append of queued) append.reject(error);
      return;
    }
    // Read by this process's readers as any row is: once the flush has covered it (readAllSync's bound).
    if (this.subscriptions.size > 0) this.tail.add(rows);
    const group: CommittedGroup = { appends: queued, settled, wrote, firstPosition: this.appender.firstWritten ?? 0 };
    if (this.flush) this.flush.committed(group);
    else this.durable([group]);
  }

  /** The groups' commits are on disk: their appends hear of them, and readers may read them. */
  private durable(groups: readonly CommittedGroup[]): void {
    if (groups.some((group) => group.wrote)) {
      this.commits.committed();
      this.appended.emit('appended');
    }
    for (const group of groups) {
      group.appends.forEach((append, index) => {
        const outcome = group.settled[index]!;
        if ('error' in outcome) append.reject(outcome.error);
        else append.resolve(outcome.result);
      });
    }
  }

  /**
   * The disk refused the flush: the commits stand in the file (readers may read them), but none
   * of their appends may be told it is durable. Each hears the error; sent again, an append finds
   * its events recorded and is answered as the first time, once a later flush succeeds.
   */
  private notDurable(groups: readonly CommittedGroup[], cause: Error): void {
    const error = new Error(`the event log's commit could not be flushed to disk: ${cause.message}`, { cause });
    for (const group of groups) {
      group.appends.forEach((append, index) => {
        const outcome = group.settled[index]!;
        append.reject('error' in outcome ? outcome.error : error);
      });
    }
    if (groups.some((group) => group.wrote)) this.appended.emit('appended');
  }

  async *readStream(streamName: string, options: { fromRevision?: bigint } = {}): AsyncIterable<RecordedEvent> {
    let from = Number(options.fromRevision ?? 0n);
    for (;;) {
      const rows = this.statements.readStream.all(streamName, from, PAGE_SIZE);
      for (const row of rows) yield toRecordedEvent(row);
      if (rows.length < PAGE_SIZE) return;
      from = rows[rows.length - 1]!.revision + 1;
    }
  }

  async readAll(options: { after?: Position; maxCount: number }): Promise<RecordedEvent[]> {
    return this.readAllSync(options.after, options.maxCount);
  }

  private readAllSync(after: Position | undefined, maxCount: number): RecordedEvent[] {
    const from = after === undefined ? 0 : Number(after.commit);
    const through = this.flush?.readableThrough() ?? NO_BOUND;
    // This process's own commits are not read back from the file (see CommittedTail); what may
    // follow them (another process's commits since) is.
    const held = this.tail.after(from, through, maxCount);
    if (held.length === 0) return this.statements.readAll.all(from, through, maxCount).map(toRecordedEvent);
    // One push a row: spread into push(), a read of some 150,000 rows or more overflows the stack (maxCount is the caller's).
    if (held.length < maxCount) for (const row of this.statements.readAll.all(held[held.length - 1]!.position, through, maxCount - held.length)) held.push(row);
    return held.map(toRecordedEvent);
  }

  /**
   * A page for a subscription. The subscriptions of one process (the projector's, the relay's)
   * mostly read the same pages one after the other: the last page read is handed to the next one
   * that asks for it, the same events (whose data is then parsed once) rather than a copy read
   * and made again. A page read earlier is a prefix of what the log holds after that place now
   * (positions only grow and events never change), so a page short of newer events is still
   * right: its reader asks again after its last event. Empty pages are never kept.
   */
  private readPage(after: Position | undefined, maxCount: number): readonly RecordedEvent[] | Promise<readonly RecordedEvent[]> {
    const from = after === undefined ? 0 : Number(after.commit);
    const last = this.lastPage;
    if (last && last.from === from && last.maxCount === maxCount) {
      this.lastPage = undefined;
      return last.events;
    }
    const events = this.readAllSync(after, maxCount);
    const newest = events.length > 0 ? Number(events[events.length - 1]!.position.commit) : 0;
    const flush = this.flush;
    if (!flush || newest <= flush.flushedThrough) return this.handedOn(from, maxCount, events);
    // Another process's commits past this process's last flush (its own are not read before
    // theirs): handed on, and to the next reader, once a flush has covered them.
    return flush.flushedTo(newest).then(() => this.handedOn(from, maxCount, events));
  }

  private handedOn(from: number, maxCount: number, events: readonly RecordedEvent[]): readonly RecordedEvent[] {
    this.lastPage = events.length > 0 && this.subscriptions.size > 1 ? { from, maxCount, events } : undefined;
    return events;
  }

  async headPosition(): Promise<Position | undefined> {
    const head = this.statements.head.get()?.position ?? null;
    return head === null ? undefined : sequencePosition(head);
  }

  subscribeToAll(options: { after?: Position }, handler: EventBatchHandler): Subscription {
    const reader = { after: options.after === undefined ? 0 : Number(options.after.commit) };
    const subscription: Subscription = pollingSubscription({
      after: options.after,
      read: (after) => {
        reader.after = after === undefined ? 0 : Number(after.commit);
        this.tail.readThrough(this.readThrough());
        return this.readPage(after, PAGE_SIZE);
      },
      handler,
      appended: this.appended,
      idleMs: this.pollIntervalMs,
      onStop: () => this.subscriptions.delete(subscription),
    });
    this.subscriptions.set(subscription, reader);
    if (this.watchOtherProcesses) this.commits.watch(() => this.otherProcessMayHaveCommitted());
    return subscription;
  }

  /** Where every subscription has read through. */
  private readThrough(): number {
    let through = Number.MAX_SAFE_INTEGER;
    for (const reader of this.subscriptions.values()) through = Math.min(through, reader.after);
    return through;
  }

  /** The marker moved: subscriptions read now if another connection committed (not where it was this one's own commit). */
  private otherProcessMayHaveCommitted(): void {
    if (!this.db.open) return;
    const version = this.statements.dataVersion.get()!;
    if (version === this.dataVersion) return;
    this.dataVersion = version;
    this.appended.emit('appended');
  }

  /** Whether other processes' commits are heard as they happen (false: found by the poll alone). */
  get hearsOtherProcesses(): boolean {
    return this.commits.watching;
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions.keys()].map((subscription) => subscription.stop()));
    // Appends asked for before close are committed and synced, not lost with the connection.
    this.commitQueued();
    await this.flush?.close();
    this.commits.close();
    this.db.close();
  }
}

function toRecordedEvent(row: EventRow): RecordedEvent {
  return new RowRecordedEvent(row);
}
