import { mkdtempSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ROOM_BYTES, StorageSpace, isOutOfSpace } from '../src/platform/storage-space.js';

/** A real logger whose lines are kept, as level, message and fields. */
function recordingLog() {
  const lines: Array<{ level: 'warn' | 'info'; fields: Record<string, unknown>; message: string }> = [];
  const logger = pino({ level: 'info', base: undefined, timestamp: false }, {
    write: (text: string) => {
      const { level, msg, ...fields } = JSON.parse(text) as { level: number; msg: string };
      lines.push({ level: level === 40 ? 'warn' : 'info', fields, message: msg });
    },
  });
  return Object.assign(logger, { lines });
}

/** A real SQLITE_FULL: a database held to a few pages, written past them. */
function sqliteFull(): unknown {
  const db = new Database(join(mkdtempSync(join(tmpdir(), 'sqlite-full-')), 'tiny.sqlite'));
  try {
    db.exec('CREATE TABLE t (v TEXT)');
    db.pragma('max_page_count = 3');
    const insert = db.prepare('INSERT INTO t VALUES (?)');
    for (;;) insert.run('x'.repeat(4000));
  } catch (error) {
    return error;
  } finally {
    db.close();
  }
}

const errnoError = (code: string) => Object.assign(new Error(`${code}: no space left on device, write`), { code });

describe('isOutOfSpace: the one place that tells a full storage from anything else', () => {
  it('recognises SQLite’s SQLITE_FULL as better-sqlite3 throws it', () => {
    const error = sqliteFull();
    expect((error as { code?: string }).code).toBe('SQLITE_FULL');
    expect(isOutOfSpace(error)).toBe(true);
  });

  it('recognises ENOSPC and EDQUOT from file writes, also as the cause of another error', () => {
    expect(isOutOfSpace(errnoError('ENOSPC'))).toBe(true);
    expect(isOutOfSpace(errnoError('EDQUOT'))).toBe(true);
    expect(isOutOfSpace(new Error('the upload failed', { cause: errnoError('ENOSPC') }))).toBe(true);
  });

  it('takes nothing else for it', () => {
    for (const other of [errnoError('EACCES'), errnoError('EIO'), Object.assign(new Error('busy'), { code: 'SQLITE_BUSY' }), new Error('disk is full'), 'ENOSPC', undefined, null]) {
      expect(isOutOfSpace(other), String(other)).toBe(false);
    }
  });
});

describe('StorageSpace: one episode, logged once each way', () => {
  it('warns once however many writes are refused, and counts an error seen twice once', () => {
    const log = recordingLog();
    const space = new StorageSpace(log, [tmpdir()]);
    try {
      const error = errnoError('ENOSPC');
      expect(space.refused(error, 'blob store')).toBe(true);
      expect(space.refused(error, 'work')).toBe(true);
      for (let attempt = 0; attempt < 5; attempt++) space.refused(sqliteFull(), 'event store');
      expect(space.full).toBe(true);
      expect(log.lines).toEqual([{ level: 'warn', fields: { store: 'blob store', reason: error.message }, message: 'storage is full: writes are refused until space is freed' }]);
      expect(space.refused(new Error('something else'), 'event store')).toBe(false);
    } finally {
      space.stop();
    }
  });

  it('ends only once there is room and a write went through after the last refusal, with one info line', async () => {
    const log = recordingLog();
    // /tmp has room to spare here: it is the write that is waited for.
    const space = new StorageSpace(log, [tmpdir(), join(tmpdir(), 'not-made-yet', 'blobs')]);
    try {
      space.refused(errnoError('ENOSPC'), 'blob store');
      await new Promise((resolve) => setTimeout(resolve, 1300));
      expect(space.full).toBe(true);
      space.wrote();
      const deadline = Date.now() + 3000;
      while (space.full && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(space.full).toBe(false);
      expect(log.lines.map((line) => [line.level, line.message])).toEqual([
        ['warn', 'storage is full: writes are refused until space is freed'],
        ['info', 'storage has space again'],
      ]);
      expect(log.lines[1]!.fields).toMatchObject({ writes_refused: 1 });
    } finally {
      space.stop();
    }
  });

  it.skipIf(process.platform !== 'linux')(`stays full while a file system it writes to has less than ROOM_BYTES (${ROOM_BYTES}) free, whatever succeeds`, async () => {
    const log = recordingLog();
    // A directory on a file system reported with no room: Linux's /proc has no free blocks at all.
    expect((await statfs('/proc')).bavail).toBe(0);
    const space = new StorageSpace(log, [tmpdir(), '/proc']);
    try {
      space.refused(errnoError('ENOSPC'), 'blob store');
      await new Promise((resolve) => setTimeout(resolve, 20));
      space.wrote();
      await new Promise((resolve) => setTimeout(resolve, 1300));
      expect(space.full).toBe(true);
      expect(log.lines).toHaveLength(1);
    } finally {
      space.stop();
    }
  });
});
