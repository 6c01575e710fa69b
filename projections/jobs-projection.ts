import type Database from 'better-sqlite3';
import type { JobEvent } from '../src/domain/job.js';
import type { Projection } from './projection.js';
import { statement } from './read-model-store.js';

/** Reserved jobs, in the order they were reserved. */
export const jobsProjection: Projection = {
  name: 'jobs',
  version: 2,
  create(db) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS jobs (
        seq             INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id          TEXT    NOT NULL UNIQUE,
        model           TEXT    NOT NULL,
        use_case        TEXT    NOT NULL,
        sla             TEXT    NOT NULL,
        price_1m_tokens REAL    NOT NULL,
        reserved_at     INTEGER NOT NULL,
        account_id      TEXT
      );
    `);
  },
  drop(db) {
    db.exec('DROP TABLE IF EXISTS jobs');
  },
  apply(db, recorded) {
    const event = recorded as unknown as JobEvent;
    if (event.type !== 'JobReserved') return;
    statement(
      db,
      `INSERT INTO jobs (job_id, model, use_case, sla, price_1m_tokens, reserved_at, account_id)
       VALUES (@job_id, @model, @use_case, @sla, @price_1m_tokens, @reserved_at, @account_id) ON CONFLICT (job_id) DO NOTHING`,
    ).run({ ...event.data, account_id: event.data.account_id ?? null });
  },
};

export interface JobRow {
  readonly job_id: string;
  readonly model: string;
  readonly use_case: string;
  readonly sla: string;
  readonly price_1m_tokens: number;
  readonly reserved_at: number;
  readonly account_id: string | null;
}

export class JobsQueries {
  constructor(private readonly db: Database.Database) {}

  list(): JobRow[] {
    return statement(this.db, 'SELECT job_id, model, use_case, sla, price_1m_tokens, reserved_at, account_id FROM jobs ORDER BY seq').all() as JobRow[];
  }
}
