import { statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';

/** What a write that found no room reports: SQLite (better-sqlite3's error code), and the file system (no space, quota). */
const OUT_OF_SPACE_CODES = new Set(['SQLITE_FULL', 'ENOSPC', 'EDQUOT']);

/**
 * Whether `error` says the storage ran out of space: SQLite's SQLITE_FULL ("database or disk is
 * full") from the event store, the read models or the relay checkpoint, and ENOSPC or EDQUOT from
 * a file write (the local blob store, scratch files). An error that wraps one counts by its cause.
 * The one place this is decided: the HTTP answer, /ready, /metrics and the logs all ask here.
 */
export function isOutOfSpace(error: unknown): boolean {
  let current = error;
  for (let depth = 0; depth < 8 && current !== null && typeof current === 'object'; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && OUT_OF_SPACE_CODES.has(code)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** Free space below which a file system still counts as full once a write was refused on it. */
export const ROOM_BYTES = 8 * 1024 * 1024;

/** How often a full storage is looked at for room. */
const LOOK_EVERY_MS = 1000;

/**
 * The bytes an unprivileged writer may still use on the file system that holds `directory`, or
 * would hold it: a store's directory is made on its first write, so its nearest existing parent
 * is asked until then.
 */
async function availableBytes(directory: string): Promise<number> {
  for (let path = directory; ; path = dirname(path)) {
    try {
      const stats = await statfs(path);
      return stats.bavail * stats.bsize;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || dirname(path) === path) throw error;
    }
  }
}

/**
 * One process's out-of-space episodes. An episode starts at the first write refused for lack of
 * space and ends once every local file system Spool writes to has ROOM_BYTES free again and a
 * write has succeeded since the last refusal: a write alone is not enough (SQLite may reuse its
 * write-ahead log's pages on a full disk, while every upload still fails), nor is room alone (a
 * quota is not seen by statfs). Each episode is logged twice, whatever the number of writes
 * refused meanwhile (the processors retry theirs): one warning when it starts, one info line when
 * it ends. /ready reports it as degraded and /metrics as `spool_storage_full`.
 */
export class StorageSpace {
  private fullSince: number | undefined;
  private lastRefusalAt = 0;
  private lastWriteAt = 0;
  private refusedInEpisode = 0;
  /** An error passes through several layers (an append, then the work that made it): counted once. */
  private readonly counted = new WeakSet<object>();
  private timer: NodeJS.Timeout | undefined;
  private looking = false;

  constructor(
    private readonly log: Pick<Logger, 'warn' | 'info'>,
    /** The directories of the local stores (DATA_DIR, a file: event store or blob store). */
    private readonly directories: readonly string[],
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether an episode is on: a write was refused for lack of space and there is no room yet. */
  get full(): boolean {
    return this.fullSince !== undefined;
  }

  /**
   * Reports a write that failed, where (`event store`, `blob store`, `read models`…). True when it
   * failed for lack of space: the caller then logs nothing of its own, the episode speaks for it.
   */
  refused(error: unknown, store: string): boolean {
    if (!isOutOfSpace(error)) return false;
    if (error !== null && typeof error === 'object') {
      if (this.counted.has(error)) return true;
      this.counted.add(error);
    }
    this.lastRefusalAt = this.now();
    this.refusedInEpisode++;
    if (this.fullSince === undefined) {
      this.fullSince = this.lastRefusalAt;
      this.log.warn({ store, reason: error instanceof Error ? error.message : String(error) }, 'storage is full: writes are refused until space is freed');
      this.timer = setInterval(() => void this.lookForRoom(), LOOK_EVERY_MS).unref();
    }
    return true;
  }

  /** Reports a write that succeeded. */
  wrote(): void {
    this.lastWriteAt = this.now();
  }

  private async lookForRoom(): Promise<void> {
    if (this.looking || this.fullSince === undefined || this.lastWriteAt <= this.lastRefusalAt) return;
    this.looking = true;
    try {
      const room = await Promise.all(this.directories.map((directory) => availableBytes(directory).catch(() => 0)));
      if (this.fullSince === undefined || this.lastWriteAt <= this.lastRefusalAt || room.some((bytes) => bytes < ROOM_BYTES)) return;
      this.log.info({ seconds: Math.round((this.now() - this.fullSince) / 1000), writes_refused: this.refusedInEpisode }, 'storage has space again');
      this.fullSince = undefined;
      this.refusedInEpisode = 0;
      clearInterval(this.timer);
      this.timer = undefined;
    } finally {
      this.looking = false;
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
