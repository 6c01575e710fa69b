import type Database from 'better-sqlite3';

/**
 * Pages of write-ahead log after which a commit checkpoints it into the database file (SQLite's
 * own mark is 1,000 pages, 4 MiB). SQLite runs that checkpoint inside the commit that crosses the
 * mark, on the thread that commits: for the embedded log and the read models, the main loop. With
 * synchronous=NORMAL it syncs the log and the database file there, and the loop waits for the
 * disk twice. A wave of 1,000 small batches (each commit touching the rows of many batches) wrote
 * some 200 MB of pages, and at 1,000 pages the read models alone checkpointed about 50 times:
 * projecting that wave's events in the service's pages took 1.7 s with the mark at 1,000 and
 * 1.1 s with no checkpoint at all (bench/FINDINGS.md). At 8,192 pages (32 MiB) the loop waits a
 * eighth as often, and a page rewritten by many commits between two checkpoints is copied once.
 */
export const WAL_AUTOCHECKPOINT_PAGES = 8_192;

/**
 * The size a write-ahead log file is cut back to once a checkpoint let it start over. It grows
 * past the checkpoint mark while a reader holds an old snapshot (the log cannot start over then);
 * without a limit SQLite keeps a file at the largest it ever was.
 */
export const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/** Sets how a connection in WAL mode checkpoints: every WAL_AUTOCHECKPOINT_PAGES, its file cut back to WAL_SIZE_LIMIT_BYTES. */
export function checkpointEvery(db: Database.Database, pages = WAL_AUTOCHECKPOINT_PAGES, limitBytes = WAL_SIZE_LIMIT_BYTES): void {
  db.pragma(`wal_autocheckpoint = ${pages}`);
  db.pragma(`journal_size_limit = ${limitBytes}`);
}
