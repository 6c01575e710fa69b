import type Database from 'better-sqlite3';
import type { FileEvent, FilePurpose } from '../src/domain/file.js';
import type { RecordedEvent } from '../src/event-store/event-store.js';
import type { Projection } from './projection.js';
import { statement } from './read-model-store.js';

export const filesProjection: Projection = {
  name: 'files',
  version: 2,
  create(db) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS files (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        id         TEXT    NOT NULL UNIQUE,
        filename   TEXT    NOT NULL,
        purpose    TEXT    NOT NULL,
        bytes      INTEGER NOT NULL,
        sha256     TEXT    NOT NULL,
        blob_key   TEXT    NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        status     TEXT    NOT NULL,
        deleted_at INTEGER,
        expired_at INTEGER,
        account_id TEXT
      );
      CREATE INDEX IF NOT EXISTS files_by_account ON files (account_id, status, seq);
      CREATE INDEX IF NOT EXISTS files_by_status_purpose ON files (status, purpose, seq);
      CREATE INDEX IF NOT EXISTS files_by_expiry ON files (status, expires_at);
    `);
  },
  drop(db) {
    db.exec('DROP TABLE IF EXISTS files');
  },
  apply(db, recorded) {
    const event = recorded as unknown as RecordedEvent & FileEvent;
    switch (event.type) {
      case 'FileUploaded':
        statement(
          db,
          `INSERT INTO files (id, filename, purpose, bytes, sha256, blob_key, created_at, expires_at, status, account_id)
           VALUES (@file_id, @filename, @purpose, @bytes, @sha256, @blob_key, @created_at, @expires_at, 'active', @account_id)
           ON CONFLICT (id) DO NOTHING`,
        ).run({ ...event.data, account_id: event.data.account_id ?? null });
        return;
      case 'FileDeleted':
        statement(db, "UPDATE files SET status = 'deleted', deleted_at = ? WHERE id = ?").run(event.data.deleted_at, event.data.file_id);
        return;
      case 'FileExpired':
        statement(db, "UPDATE files SET status = 'expired', expired_at = ? WHERE id = ?").run(event.data.expired_at, event.data.file_id);
        return;
    }
  },
};

export interface FileRow {
  readonly id: string;
  readonly filename: string;
  readonly purpose: FilePurpose;
  readonly bytes: number;
  readonly sha256: string;
  readonly blob_key: string;
  readonly created_at: number;
  readonly expires_at: number | null;
  /** The account that owns it (ACCOUNTS=required); null when accounts were off. */
  readonly account_id: string | null;
}

export interface FileListQuery {
  readonly limit: number;
  readonly order: 'asc' | 'desc';
  readonly purpose?: FilePurpose;
  /** Exclusive cursor: the id of the last file of the previous page. */
  readonly after?: string;
}

export class UnknownCursorError extends Error {
  override readonly name = 'UnknownCursorError';
}

const COLUMNS = 'seq, id, filename, purpose, bytes, sha256, blob_key, created_at, expires_at, account_id';

/**
 * Queries on the files read model. A file past its expires_at is gone for readers at once, even
 * before the sweeper records FileExpired.
 */
export class FilesQueries {
  constructor(private readonly db: Database.Database) {}

  get(fileId: string, now: number): FileRow | undefined {
    return statement(this.db, `SELECT ${COLUMNS} FROM files WHERE id = ? AND status = 'active' AND (expires_at IS NULL OR expires_at > ?)`).get(fileId, now) as FileRow | undefined;
  }

  /** `owner`: only that account's files (a string), or every file (undefined); a cursor outside them is unknown. */
  list(query: FileListQuery, now: number, owner?: string): { data: FileRow[]; hasMore: boolean } {
    const conditions = ["status = 'active'", '(expires_at IS NULL OR expires_at > @now)'];
    const params: Record<string, unknown> = { now, limit: query.limit + 1, owner };
    if (owner !== undefined) conditions.push('account_id = @owner');
    if (query.purpose) {
      conditions.push('purpose = @purpose');
      params.purpose = query.purpose;
    }
    if (query.after !== undefined) {
      // Any file ever uploaded is a valid cursor, even if deleted since the page was served.
      const cursor = this.db.prepare<Record<string, unknown>, { seq: number }>(`SELECT seq FROM files WHERE id = @after${owner === undefined ? '' : ' AND account_id = @owner'}`).get({ after: query.after, owner });
      if (!cursor) throw new UnknownCursorError(`No file with id ${query.after} to list after`);
      conditions.push(query.order === 'asc' ? 'seq > @cursor' : 'seq < @cursor');
      params.cursor = cursor.seq;
    }
    const rows = this.db
      .prepare<Record<string, unknown>, FileRow>(
        `SELECT ${COLUMNS} FROM files WHERE ${conditions.join(' AND ')} ORDER BY seq ${query.order === 'asc' ? 'ASC' : 'DESC'} LIMIT @limit`,
      )
      .all(params);
    const hasMore = rows.length > query.limit;
    return { data: hasMore ? rows.slice(0, query.limit) : rows, hasMore };
  }

  /** The account that owns the file whatever its status (null: none, accounts were off); undefined if no such file was uploaded. */
  ownerOf(fileId: string): string | null | undefined {
    return (statement(this.db, 'SELECT account_id FROM files WHERE id = ?').get(fileId) as { account_id: string | null } | undefined)?.account_id;
  }

  /**
   * The file's status whether deleted or expired or not; undefined if no such file was uploaded.
   * Its statement is prepared once: the debris sweep asks it of every blob in the store.
   */
  statusOf(fileId: string): 'active' | 'deleted' | 'expired' | undefined {
    return (statement(this.db, 'SELECT status FROM files WHERE id = ?').get(fileId) as { status: 'active' | 'deleted' | 'expired' } | undefined)?.status;
  }

  /** Active files whose expires_at has passed, oldest expiry first. */
  dueForExpiry(now: number, limit: number): FileRow[] {
    return this.db
      .prepare<[number, number], FileRow>(
        `SELECT ${COLUMNS} FROM files WHERE status = 'active' AND expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?`,
      )
      .all(now, limit);
  }
}
