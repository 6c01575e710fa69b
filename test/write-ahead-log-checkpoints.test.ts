import { randomUUID } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openReadModelStore } from '../projections/read-model-store.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { WAL_AUTOCHECKPOINT_PAGES, WAL_SIZE_LIMIT_BYTES } from '../src/platform/write-ahead-log-checkpoints.js';
import { tempDir } from './support/service.js';

const PAGE = 4096;
/** SQLite's own checkpoint mark, which a commit on the main loop no longer stops at. */
const SQLITE_DEFAULT_PAGES = 1000;
const size = (path: string) => (existsSync(path) ? statSync(path).size : 0);

/**
 * Writes commits of about `pagesPerCommit` pages each through `commit` until `pages` pages have
 * gone into the write-ahead log, and reports the database file's and the log's sizes at the end.
 */
async function writePages(file: string, pages: number, commit: (bytes: number) => Promise<void> | void): Promise<{ database: number; wal: number }> {
  const perCommit = 8;
  for (let written = 0; written < pages; written += perCommit) await commit(perCommit * PAGE - 512);
  return { database: size(file), wal: size(`${file}-wal`) };
}

describe('write-ahead log checkpoints of the files the main loop commits to', () => {
  const cases: Array<[string, (dir: string) => Promise<{ file: string; commit: (bytes: number) => Promise<void> | void; close: () => Promise<void> | void }>]> = [
    [
      'the embedded event log',
      async (dir) => {
        const file = join(dir, 'events.sqlite');
        const store = new SqliteEventStore(file);
        return {
          file,
          commit: async (bytes) => {
            await store.appendToStream(`wal-${randomUUID()}`, [{ id: randomUUID(), type: 'Filled', data: { text: 'x'.repeat(bytes) }, metadata: { schemaVersion: 1 } }]);
          },
          close: () => store.close(),
        };
      },
    ],
    [
      'the read models',
      async (dir) => {
        const file = join(dir, 'read-models.sqlite');
        const db = openReadModelStore(file);
        db.exec('CREATE TABLE filler (id TEXT PRIMARY KEY, text TEXT NOT NULL)');
        const insert = db.prepare('INSERT INTO filler (id, text) VALUES (?, ?)');
        return { file, commit: (bytes) => void db.transaction(() => insert.run(randomUUID(), 'x'.repeat(bytes)))(), close: () => db.close() };
      },
    ],
  ];

  for (const [name, open] of cases) {
    it(`${name}: no checkpoint at SQLite's 1,000 pages, one by ${WAL_AUTOCHECKPOINT_PAGES.toLocaleString('en')}, the log file kept under its limit`, async () => {
      const dir = tempDir('wal-checkpoints');
      const { file, commit, close } = await open(dir);
      try {
        const start = size(file);
        // Past SQLite's mark: with it, a commit would have checkpointed, filling the database file.
        const early = await writePages(file, SQLITE_DEFAULT_PAGES * 2, commit);
        expect(early.database).toBe(start);
        expect(early.wal).toBeGreaterThan(SQLITE_DEFAULT_PAGES * 2 * PAGE);
        // Past Spool's mark: a commit has checkpointed (the pages are in the database file) and the log started over.
        const late = await writePages(file, WAL_AUTOCHECKPOINT_PAGES * 1.5, commit);
        expect(late.database).toBeGreaterThan(WAL_AUTOCHECKPOINT_PAGES * PAGE * 0.9);
        expect(late.wal).toBeLessThanOrEqual(WAL_SIZE_LIMIT_BYTES);
        expect(late.wal).toBeLessThan((WAL_AUTOCHECKPOINT_PAGES + 64) * (PAGE + 24) + 32);
      } finally {
        await close();
      }
    });
  }
});
