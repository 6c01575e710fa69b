import { EventEmitter } from 'node:events';
import { closeSync, fdatasync, openSync } from 'node:fs';
import Database from 'better-sqlite3';
import { preparePrivateDatabaseFile } from '../platform/private-files.js';
import { pollingSubscription } from './polling-subscription.js';
import { SharedFileCommits } from './shared-file-commits.js';
import { RowRecordedEvent, sequencePosition } from './row-recorded-event.js';
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
} from './event-store.js';

interface EventRow {
  position: number;
  event_id: string;
  stream_name: string;
  revision: number;
  type: string;
  data: string;
  metadata: string;
  recorded_at: number;
}

const PAGE_SIZE = 1000;

interface QueuedAppend {
  readonly streamName: string;
  readonly events: readonly NewEvent[];
  readonly expected: ExpectedRevision;
  readonly resolve: (result: AppendResult) => void;
  readonly reject: (error: unknown) => void;
}

/** A group commit that returned, its appends waiting to hear of it until its frames are on disk. */
interface CommittedGroup {
  readonly appends: readonly QueuedAppend[];
  readonly settled: ReadonlyArray<{ result: AppendResult } | { error: unknown }>;
  /** Whether the commit wrote an event (not only answers from events recorded before). */
  readonly wrote: boolean;
  /** The first position it wrote (where it wrote). */
  readonly firstPosition: number;
}

/** Stands for "no bound" in a read of the log's tail: SQLite's integers reach 2^63, positions never 2^53. */
const NO_BOUND = Number.MAX_SAFE_INTEGER;

/** How long readers wait before they ask again for a flush after the disk refused one. */
const RETRY_FLUSH_MS = 100;

/** Flushes a file's data to disk off the main thread, calling back when done (node:fs's fdatasync). */
export type FileSync = (fd: number, done: (error: Error | null) => void) => void;

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
 * checkpoint), and the store fdatasyncs the WAL file on libuv's thread pool, as FULL would have
 * done, before it answers the commit's appends. Commits made while a sync is in flight share the
 * next one. A subscription hands on no event that a power cut could still take back: its reads of
 * the log stop short of this process's first commit not yet flushed (`readableThrough`), and a
 * page holding another process's commits past what this process's flushes have covered
 * (`flushedThrough`) goes on once a flush of this process's, begun after the read, has ended (that
 * process's own flush has mostly made them durable already, and this one finds little to write).
 * Commands' reads of a stream do see a commit before its flush: an append decided on it is
 * answered only after a later flush, which covers both.
 */
export class SqliteEventStore implements EventStore {
  readonly kind = 'embedded';
  private readonly db: Database.Database;
  private readonly appended = new EventEmitter();
  private readonly subscriptions = new Set<Subscription>();
  private readonly statements;
  private readonly appendInSavepoint: (streamName: string, events: readonly NewEvent[], expected: ExpectedRevision, recordedAt: number) => { result: AppendResult; wrote: boolean };
  private queued: QueuedAppend[] = [];
  /** The page a subscription read last, for the next subscription that asks for it (readPage). */
  private lastPage: { readonly from: number; readonly maxCount: number; readonly events: readonly RecordedEvent[] } | undefined;

  /** Other processes' commits to the file, heard as they happen (SharedFileCommits). */
  private readonly commits: SharedFileCommits;
  private readonly pollIntervalMs: number;
  private readonly watchOtherProcesses: boolean;
  /** SQLite's data_version when last read: it moves only when another connection commits. */
  private dataVersion: number;

  /** Where commits are made durable: the WAL file's descriptor and the sync that flushes it (undefined where the file is not in WAL mode: SQLite syncs in the commit then). */
  private readonly fileSync: FileSync | undefined;
  private walFd: number | undefined;
  private readonly walPath: string;
  /** Commits that returned and wait for the next flush; those the flush in flight covers. */
  private unsynced: CommittedGroup[] = [];
  private inFlight: readonly CommittedGroup[] = [];
  /** Subscriptions' reads waiting for the end of the flush in flight (or of the next one). */
  private flushWaiters: Array<() => void> = [];
  private syncing = false;
  /** The log's last position when the last flush that succeeded began: everything up to it is on disk. */
  private flushedThrough = 0;
  /** Called once nothing waits for a sync (close waits for it). */
  private onDrained: (() => void) | undefined;

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
    this.walPath = `${path}-wal`;
    const walMode = this.db.pragma('journal_mode = WAL', { simple: true }) === 'wal';
    // In WAL mode the store syncs the log itself, off the main thread (see the class's comment);
    // where the file system refuses WAL, SQLite syncs its rollback journal in every commit.
    this.fileSync = walMode ? (options.fileSync ?? fdatasync) : undefined;
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
    this.statements = {
      lastRevision: this.db.prepare<[string], { revision: number | null }>(
        'SELECT max(revision) AS revision FROM events WHERE stream_name = ?',
      ),
      byEventId: this.db.prepare<[string], EventRow>('SELECT * FROM events WHERE event_id = ?'),
      // Bound by place, not by name: an object of named parameters is read key by key on every
      // insert, and every batch line's outcome is one.
      insert: this.db.prepare<[string, string, number, string, string, string, number]>(
        `INSERT INTO events (event_id, stream_name, revision, type, data, metadata, recorded_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
      readStream: this.db.prepare<[string, number, number], EventRow>(
        'SELECT * FROM events WHERE stream_name = ? AND revision >= ? ORDER BY revision LIMIT ?',
      ),
      readAll: this.db.prepare<[number, number, number], EventRow>(
        'SELECT * FROM events WHERE position > ? AND position <= ? ORDER BY position LIMIT ?',
      ),
      head: this.db.prepare<[], { position: number | null }>('SELECT max(position) AS position FROM events'),
    };
    this.dataVersion = this.db.pragma('data_version', { simple: true }) as number;
    this.appendInSavepoint = this.db.transaction((streamName: string, events: readonly NewEvent[], expected: ExpectedRevision, recordedAt: number) =>
      this.appendInTransaction(streamName, events, expected, recordedAt),
    );
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
    this.firstWritten = undefined;
    // One commit, one time: its events all carry it.
    const recordedAt = Date.now();
    try {
      this.db
        .transaction(() => {
          for (const append of queued) {
            try {
              // A transaction function called inside another runs in a savepoint.
              const outcome = this.appendOnce(append, recordedAt);
              wrote ||= outcome.wrote;
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
    const group: CommittedGroup = { appends: queued, settled, wrote, firstPosition: this.firstWritten ?? 0 };
    // Nothing written, and the log on disk through its head: its answers (conflicts, events
    // recorded before) rest on commits already flushed.
    if (!this.fileSync || (!wrote && !this.syncing && this.unsynced.length === 0 && (this.statements.head.get()?.position ?? 0) <= this.flushedThrough)) {
      this.durable([group]);
      return;
    }
    this.unsynced.push(group);
    if (!this.syncing) this.syncUnsynced();
  }

  /**
   * The first position written in the commit being made (its first insert). An insert undone with
   * its savepoint may have set it: AUTOINCREMENT hands the same number to the next insert then, so
   * it is never past the commit's first event.
   */
  private firstWritten: number | undefined;

  /** Resolves once a flush of this process's has covered the log through `position`. */
  private async flushedTo(position: number): Promise<void> {
    while (position > this.flushedThrough) await this.flushEnded();
  }

  /** Resolves at the end of the flush in flight, or of one begun now where none is. */
  private flushEnded(): Promise<void> {
    return new Promise((resolve) => {
      this.flushWaiters.push(resolve);
      if (!this.syncing) this.syncUnsynced();
    });
  }

  /** Flushes the WAL for every commit that returned so far; commits made meanwhile wait for the next flush. */
  private syncUnsynced(): void {
    const groups = this.unsynced;
    this.unsynced = [];
    this.inFlight = groups;
    this.syncing = true;
    // Every commit up to here, this process's or another's, is in the file the flush covers.
    const head = this.statements.head.get()?.position ?? 0;
    const finished = (error: Error | null) => {
      this.syncing = false;
      this.inFlight = [];
      if (error) this.notDurable(groups, error);
      else {
        this.flushedThrough = Math.max(this.flushedThrough, head);
        this.durable(groups);
      }
      // Readers look again: what this flush covered goes on, the rest waits for the next. After
      // a flush the disk refused, a while later: they hold back what is not on disk, without
      // spinning on a disk that keeps refusing.
      const waiters = this.flushWaiters;
      this.flushWaiters = [];
      const readAgain = () => {
        for (const waiter of waiters) waiter();
      };
      if (error) setTimeout(readAgain, RETRY_FLUSH_MS).unref();
      else readAgain();
      if (this.unsynced.length > 0) this.syncUnsynced();
      else this.onDrained?.();
    };
    try {
      this.walFd ??= openSync(this.walPath, 'r');
    } catch (error) {
      queueMicrotask(() => finished(error as Error));
      return;
    }
    this.fileSync!(this.walFd, finished);
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

  /** The last position this process's readers may read: short of its first commit not yet flushed. */
  private readableThrough(): number {
    for (const group of this.inFlight) if (group.wrote) return group.firstPosition - 1;
    for (const group of this.unsynced) if (group.wrote) return group.firstPosition - 1;
    return NO_BOUND;
  }

  /** One append in its savepoint; one with an event recorded before answers as that append did (or fails as a conflict). */
  private appendOnce(append: QueuedAppend, recordedAt: number): { result: AppendResult; wrote: boolean } {
    try {
      return this.appendInSavepoint(append.streamName, append.events, append.expected, recordedAt);
    } catch (error) {
      if (!(error instanceof RecordedBeforeSignal)) throw error;
      const replayed = this.replayedIfRecorded(append.streamName, append.events);
      // None recorded once the savepoint is undone: the append named one id twice.
      if (!replayed) throw error.cause;
      return { result: replayed, wrote: false };
    }
  }

  private appendInTransaction(
    streamName: string,
    events: readonly NewEvent[],
    expected: ExpectedRevision,
    recordedAt: number,
  ): { result: AppendResult; wrote: boolean } {
    const last = this.statements.lastRevision.get(streamName)?.revision ?? null;
    const actual = last === null ? 'no_stream' : BigInt(last);
    const matches =
      expected === 'any' ||
      (expected === 'no_stream' && last === null) ||
      (expected === 'stream_exists' && last !== null) ||
      (typeof expected === 'bigint' && last !== null && BigInt(last) === expected);
    // An append sent again (a retry, a redelivered message) finds its stream moved on by itself:
    // the event ids, not the revision, say whether it is the same append.
    if (!matches) {
      const replayed = this.replayedIfRecorded(streamName, events);
      if (replayed) return { result: replayed, wrote: false };
      throw new WrongExpectedRevisionError(streamName, expected, actual);
    }

    let revision = last === null ? 0 : last + 1;
    let position = 0;
    try {
      for (const event of events) {
        const info = this.statements.insert.run(event.id, streamName, revision, event.type, event.serializedData ?? JSON.stringify(event.data), JSON.stringify(event.metadata), recordedAt);
        position = Number(info.lastInsertRowid);
        this.firstWritten ??= position;
        revision += 1;
      }
    } catch (error) {
      // The unique event id, not a read of every id before the insert, finds an event recorded
      // already (a read per event was a twentieth of a batch line's main-thread time). The
      // savepoint this runs in undoes whatever this append inserted before it.
      if (!isDuplicateEventId(error)) throw error;
      throw new RecordedBeforeSignal('an event id is recorded already', { cause: error });
    }
    return { result: { nextExpectedRevision: BigInt(revision - 1), position: sequencePosition(position) }, wrote: true };
  }

  /** The answer to an append whose events are recorded already; undefined where none of them is. */
  private replayedIfRecorded(streamName: string, events: readonly NewEvent[]): AppendResult | undefined {
    const found = events.map((event) => this.statements.byEventId.get(event.id)).filter((row): row is EventRow => row !== undefined);
    return found.length > 0 ? this.replayedAppend(streamName, events, found) : undefined;
  }

  /** The same append sent again (a retry, a redelivered message): answer as the first time. */
  private replayedAppend(streamName: string, events: readonly NewEvent[], found: EventRow[]): AppendResult {
    const sameAppend =
      found.length === events.length &&
      found.every(
        (row, index) => row.stream_name === streamName && (index === 0 || row.revision === found[index - 1]!.revision + 1),
      );
    if (!sameAppend) throw new IdempotencyConflictError(streamName, found.map((row) => row.event_id));
    const last = found[found.length - 1]!;
    return { nextExpectedRevision: BigInt(last.revision), position: sequencePosition(last.position) };
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
    return this.statements.readAll.all(from, this.readableThrough(), maxCount).map(toRecordedEvent);
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
    if (!this.fileSync || newest <= this.flushedThrough) return this.handedOn(from, maxCount, events);
    // Another process's commits past this process's last flush (its own are not read before
    // theirs): handed on, and to the next reader, once a flush has covered them.
    return this.flushedTo(newest).then(() => this.handedOn(from, maxCount, events));
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
    const subscription: Subscription = pollingSubscription({
      after: options.after,
      read: (after) => this.readPage(after, PAGE_SIZE),
      handler,
      appended: this.appended,
      idleMs: this.pollIntervalMs,
      onStop: () => this.subscriptions.delete(subscription),
    });
    this.subscriptions.add(subscription);
    if (this.watchOtherProcesses) this.commits.watch(() => this.otherProcessMayHaveCommitted());
    return subscription;
  }

  /** The marker moved: subscriptions read now if another connection committed (not where it was this one's own commit). */
  private otherProcessMayHaveCommitted(): void {
    if (!this.db.open) return;
    const version = this.db.pragma('data_version', { simple: true }) as number;
    if (version === this.dataVersion) return;
    this.dataVersion = version;
    this.appended.emit('appended');
  }

  /** Whether other processes' commits are heard as they happen (false: found by the poll alone). */
  get hearsOtherProcesses(): boolean {
    return this.commits.watching;
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((subscription) => subscription.stop()));
    // Appends asked for before close are committed and synced, not lost with the connection.
    this.commitQueued();
    if (this.syncing) await new Promise<void>((resolve) => (this.onDrained = resolve));
    this.onDrained = undefined;
    if (this.walFd !== undefined) closeSync(this.walFd);
    this.walFd = undefined;
    this.commits.close();
    this.db.close();
  }
}


/** Thrown inside an append's savepoint (undoing it) when one of its event ids is recorded already. */
class RecordedBeforeSignal extends Error {}

function isDuplicateEventId(error: unknown): boolean {
  return error instanceof Error && (error as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE' && error.message.includes('events.event_id');
}

function toRecordedEvent(row: EventRow): RecordedEvent {
  return new RowRecordedEvent(row);
}
