import Database from 'better-sqlite3';
import { preparePrivateDatabaseFile } from '../src/platform/private-files.js';

/**
 * SQLite's page cache, in KiB. better-sqlite3 builds SQLite with 16 MiB per connection, which the
 * read models of a long batch fill; what the projections touch per event (the rows of running
 * batches, the indexes' upper levels) fits in 2 MiB, and the OS's page cache holds the rest.
 */
const PAGE_CACHE_KIB = 2048;

/**
 * The SQLite file that holds every read model and each projection's checkpoint. It is disposable:
 * delete it and the projections rebuild it from the event log.
 */
export function openReadModelStore(path: string): Database.Database {
  preparePrivateDatabaseFile(path);
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  // A lost tail after a power cut is re-projected from the log: the checkpoint commits with the rows.
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 10000');
  db.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
  db.exec(`
    CREATE TABLE IF NOT EXISTS projection_checkpoints (
      name     TEXT PRIMARY KEY,
      version  INTEGER NOT NULL,
      position TEXT
    );
  `);
  return db;
}

/** Every read-model row, table by table, in key order: two stores with equal dumps are identical. */
export function dumpReadModels(db: Database.Database): Record<string, unknown[]> {
  const tables = db
    .prepare<[], { name: string }>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'projection_checkpoints' ORDER BY name",
    )
    .all();
  const dump: Record<string, unknown[]> = {};
  for (const { name } of tables) {
    dump[name] = db.prepare(`SELECT * FROM "${name}" ORDER BY rowid`).all();
  }
  return dump;
}

const statementCache = new WeakMap<Database.Database, Map<string, Database.Statement>>();

/** A prepared statement, prepared once per database: projections run the same few per event. */
export function statement(db: Database.Database, sql: string): Database.Statement {
  let cache = statementCache.get(db);
  if (!cache) statementCache.set(db, (cache = new Map()));
  let prepared = cache.get(sql);
  if (!prepared) cache.set(sql, (prepared = db.prepare(sql)));
  return prepared;
}

/** Numbers a table's AUTOINCREMENT from 1 again (its counter lives in sqlite_sequence): for a read model rebuilt from the log. */
export function resetAutoincrement(db: Database.Database, table: string): void {
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").get()) db.prepare('DELETE FROM sqlite_sequence WHERE name = ?').run(table);
}
