import { type FSWatcher, closeSync, openSync, watch, writeSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { PRIVATE_FILE_MODE } from '../platform/private-files.js';

/** What each commit writes: its content says nothing, the write itself is the notification. */
const MARK = Buffer.from([1]);

/**
 * Tells the processes that share one SQLite log file (the scaled-out shape on one machine) of one
 * another's commits as they happen, rather than at their next poll of the file.
 *
 * SQLite itself says nothing across processes, and a change to its write-ahead log is no sign: a
 * commit's frames are written and fsynced before the shared index makes them visible (a reader
 * woken by the write could find nothing yet, and hear nothing more). So each commit, once it
 * returned (visible to every reader), writes a byte into a marker file beside the log (no
 * fsync: it says only "look now"); each process watches the marker through the file system's
 * change notifications (inotify on Linux). The marker's own writer hears its own commits too: the
 * store tells them apart by SQLite's `data_version`, which moves only for other connections'
 * commits. Where nothing can be watched (no notifications on that file system, or none left to
 * the user), the store's poll remains, as before.
 */
export class SharedFileCommits {
  private readonly markerPath: string;
  private fd: number | undefined;
  private watcher: FSWatcher | undefined;
  private scheduled = false;

  constructor(databasePath: string) {
    this.markerPath = `${databasePath}-commits`;
  }

  /** After each commit that wrote: one byte written over the marker's first (opened on the first commit). */
  committed(): void {
    try {
      this.fd ??= openSync(this.markerPath, 'w', PRIVATE_FILE_MODE);
      writeSync(this.fd, MARK, 0, 1, 0);
    } catch {
      // Only a hint to other processes: they still poll. The commit itself stands.
    }
  }

  /**
   * Calls `changed` once a turn of the event loop at most after any process (this one included)
   * wrote the marker. Where the folder cannot be watched, nothing (`watching` stays false: the
   * poll is all there is then).
   */
  watch(changed: () => void): void {
    if (this.watcher) return;
    const name = basename(this.markerPath);
    try {
      // The folder, not the file: the marker may not exist yet, or be made again by another process.
      this.watcher = watch(dirname(this.markerPath), { persistent: false }, (_event, file) => {
        if (file !== name || this.scheduled) return;
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          if (this.watcher) changed();
        });
      });
      this.watcher.on('error', () => this.stopWatching());
    } catch {
      // No notifications here (none on this file system, or none left to the user): the poll remains.
    }
  }

  /** Whether other processes' commits are being watched for (false: only the poll finds them). */
  get watching(): boolean {
    return this.watcher !== undefined;
  }

  private stopWatching(): void {
    this.watcher?.close();
    this.watcher = undefined;
  }

  close(): void {
    this.stopWatching();
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}
