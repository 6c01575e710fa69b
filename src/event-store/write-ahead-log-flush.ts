import { closeSync, fdatasync, openSync } from 'node:fs';

/** Flushes a file's data to disk off the main thread, calling back when done (node:fs's fdatasync). */
export type FileSync = (fd: number, done: (error: Error | null) => void) => void;

/** A commit that returned, as the flush sees it. */
export interface CommitToFlush {
  /** Whether the commit wrote an event (not only answers from events recorded before). */
  readonly wrote: boolean;
  /** The first position it wrote (where it wrote). */
  readonly firstPosition: number;
}

/** Stands for "no bound" in a read of the log's tail: SQLite's integers reach 2^63, positions never 2^53. */
export const NO_BOUND = Number.MAX_SAFE_INTEGER;

/** How long readers wait before they ask again for a flush after the disk refused one. */
const RETRY_FLUSH_MS = 100;

/**
 * Makes an SQLite file's commits durable off the main thread: it fdatasyncs the write-ahead log
 * on libuv's thread pool, as synchronous=FULL would inside every commit, and only then says the
 * commits it covered are durable. Commits that return while a flush is in flight share the next
 * one. It also tells readers how far they may read: short of the first commit not yet flushed
 * (`readableThrough`), and, for another process's commits, through what a flush of this
 * process's has covered (`flushedThrough`, `flushedTo`).
 */
export class WriteAheadLogFlush<Commit extends CommitToFlush> {
  private readonly walPath: string;
  private readonly fileSync: FileSync;
  /** The log's last position now (every commit up to it is in the file a flush covers). */
  private readonly head: () => number;
  private readonly durable: (commits: readonly Commit[]) => void;
  private readonly notDurable: (commits: readonly Commit[], error: Error) => void;
  private walFd: number | undefined;
  /** Commits that returned and wait for the next flush. */
  private unsynced: Commit[] = [];
  /** Those the flush in flight covers; undefined while none is in flight. */
  private inFlight: readonly Commit[] | undefined;
  /** Readers waiting for the end of the flush in flight (or of the next one). */
  private flushWaiters: Array<() => void> = [];
  /** The log's last position when the last flush that succeeded began: everything up to it is on disk. */
  private flushed = 0;
  /** Called once nothing waits for a flush (close waits for it). */
  private onDrained: (() => void) | undefined;

  constructor(options: {
    readonly walPath: string;
    readonly fileSync?: FileSync;
    readonly head: () => number;
    /** The commits are on disk: their appends may hear of them. */
    readonly durable: (commits: readonly Commit[]) => void;
    /** The disk refused the flush that covered them. */
    readonly notDurable: (commits: readonly Commit[], error: Error) => void;
  }) {
    this.walPath = options.walPath;
    this.fileSync = options.fileSync ?? fdatasync;
    this.head = options.head;
    this.durable = options.durable;
    this.notDurable = options.notDurable;
  }

  /** The log on disk through this position (the head when the last successful flush began). */
  get flushedThrough(): number {
    return this.flushed;
  }

  /** A commit returned: it is durable once a flush covers it. */
  committed(commit: Commit): void {
    // Nothing written, and the log on disk through its head: its answers (conflicts, events
    // recorded before) rest on commits already flushed.
    if (!commit.wrote && this.inFlight === undefined && this.unsynced.length === 0 && this.head() <= this.flushed) {
      this.durable([commit]);
      return;
    }
    this.unsynced.push(commit);
    if (this.inFlight === undefined) this.flushUnsynced();
  }

  /** The last position readers may read: short of the first commit not yet flushed. */
  readableThrough(): number {
    for (const commit of this.inFlight ?? []) if (commit.wrote) return commit.firstPosition - 1;
    for (const commit of this.unsynced) if (commit.wrote) return commit.firstPosition - 1;
    return NO_BOUND;
  }

  /** Resolves once a flush of this process's has covered the log through `position`. */
  async flushedTo(position: number): Promise<void> {
    while (position > this.flushed) await this.flushEnded();
  }

  /** Resolves once no flush is in flight, and closes the log's descriptor. */
  async close(): Promise<void> {
    if (this.inFlight !== undefined) await new Promise<void>((resolve) => (this.onDrained = resolve));
    this.onDrained = undefined;
    if (this.walFd !== undefined) closeSync(this.walFd);
    this.walFd = undefined;
  }

  /** Resolves at the end of the flush in flight, or of one begun now where none is. */
  private flushEnded(): Promise<void> {
    return new Promise((resolve) => {
      this.flushWaiters.push(resolve);
      if (this.inFlight === undefined) this.flushUnsynced();
    });
  }

  /** Flushes the WAL for every commit that returned so far; commits made meanwhile wait for the next flush. */
  private flushUnsynced(): void {
    const commits = this.unsynced;
    this.unsynced = [];
    this.inFlight = commits;
    // Every commit up to here, this process's or another's, is in the file the flush covers.
    const head = this.head();
    const finished = (error: Error | null) => {
      this.inFlight = undefined;
      if (error) this.notDurable(commits, error);
      else {
        this.flushed = Math.max(this.flushed, head);
        this.durable(commits);
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
      if (this.unsynced.length > 0) this.flushUnsynced();
      else this.onDrained?.();
    };
    try {
      this.walFd ??= openSync(this.walPath, 'r');
    } catch (error) {
      queueMicrotask(() => finished(error as Error));
      return;
    }
    this.fileSync(this.walFd, finished);
  }
}
