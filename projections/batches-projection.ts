import type Database from 'better-sqlite3';
import { type LineFailedData, type LineOutcomeFields, type ServedBy, type Usage, lineError, lineOutcomeFields } from '../src/domain/line-outcome.js';
import { MAX_LISTED_ERRORS } from '../src/domain/batch-input.js';
import { type BatchError, type BatchEvent, type BatchStatus, type ChunkSpec, statusAfter, stoppingAfter } from '../src/domain/batch.js';
import { parseStreamName, streamKind } from '../src/domain/stream-names.js';
import type { RecordedEvent } from '../src/event-store/event-store.js';
import type { Projection } from './projection.js';
import type { Projector } from './projector.js';
import { statement } from './read-model-store.js';

export const batchesProjection: Projection = {
  name: 'batches',
  // 2: batch_chunks lost its settled column (nothing read it).
  // 3: cached_tokens and reasoning_tokens; errors keep the lowest lines, not the first to arrive.
  // 4: work_blob_key (prefix-aware order).
  // 7: batch_chunks.failed, each chunk's failed lines: the finalizer passes over the error lines of a chunk with none.
  version: 7,
  create(db) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS batches (
        seq                  INTEGER PRIMARY KEY AUTOINCREMENT,
        id                   TEXT    NOT NULL UNIQUE,
        input_file_id        TEXT    NOT NULL,
        endpoint             TEXT    NOT NULL,
        completion_window    TEXT    NOT NULL,
        job_id               TEXT    NOT NULL,
        model                TEXT    NOT NULL,
        price_1m_tokens      REAL    NOT NULL,
        metadata             TEXT,
        output_expires_after TEXT,
        status               TEXT    NOT NULL,
        stopping             TEXT,
        input_blob_key       TEXT,
        work_blob_key        TEXT,
        created_at           INTEGER NOT NULL,
        expires_at           INTEGER,
        in_progress_at       INTEGER,
        finalizing_at        INTEGER,
        completed_at         INTEGER,
        failed_at            INTEGER,
        expired_at           INTEGER,
        cancelling_at        INTEGER,
        cancelled_at         INTEGER,
        output_file_id       TEXT,
        error_file_id        TEXT,
        total                INTEGER NOT NULL DEFAULT 0,
        completed            INTEGER NOT NULL DEFAULT 0,
        failed               INTEGER NOT NULL DEFAULT 0,
        prompt_tokens        INTEGER NOT NULL DEFAULT 0,
        completion_tokens    INTEGER NOT NULL DEFAULT 0,
        total_tokens         INTEGER NOT NULL DEFAULT 0,
        cached_tokens        INTEGER NOT NULL DEFAULT 0,
        reasoning_tokens     INTEGER NOT NULL DEFAULT 0,
        error_count          INTEGER NOT NULL DEFAULT 0,
        account_id           TEXT,
        estimated_tokens     INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX IF NOT EXISTS batches_by_status ON batches (status);
      CREATE TABLE IF NOT EXISTS batch_served_by (
        batch_id   TEXT    NOT NULL,
        checkpoint TEXT    NOT NULL,
        sync_id    TEXT    NOT NULL,
        lines      INTEGER NOT NULL,
        PRIMARY KEY (batch_id, checkpoint, sync_id)
      );
      CREATE INDEX IF NOT EXISTS batches_by_account ON batches (account_id, seq);
      CREATE TABLE IF NOT EXISTS batch_chunks (
        batch_id   TEXT    NOT NULL,
        chunk      INTEGER NOT NULL,
        first_line INTEGER NOT NULL,
        lines      INTEGER NOT NULL,
        start      INTEGER NOT NULL,
        end        INTEGER NOT NULL,
        failed     INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (batch_id, chunk)
      );
      CREATE TABLE IF NOT EXISTS batch_errors (
        batch_id TEXT    NOT NULL,
        position INTEGER NOT NULL,
        code     TEXT    NOT NULL,
        line     INTEGER,
        message  TEXT    NOT NULL,
        param    TEXT,
        PRIMARY KEY (batch_id, position)
      );
      CREATE INDEX IF NOT EXISTS batch_errors_by_line ON batch_errors (batch_id, line);
    `);
  },
  drop(db) {
    db.exec('DROP TABLE IF EXISTS batches; DROP TABLE IF EXISTS batch_chunks; DROP TABLE IF EXISTS batch_errors;');
  },
  apply(db, recorded) {
    applyPage(db, [recorded]);
  },
  applyPage,
};

/**
 * A page holds hundreds of line outcomes of a few batches: their counters move by one UPDATE per
 * batch, written before any other event of the page is applied and at the page's end.
 */
function applyPage(db: Database.Database, events: readonly RecordedEvent[]): void {
  const counts = new LineOutcomeCounts();
  for (const recorded of events) {
    if (streamKind(recorded.streamName) === 'batchlines') {
      applyLineOutcome(db, recorded, counts);
      continue;
    }
    counts.write(db);
    applyBatchEvent(db, recorded);
  }
  counts.write(db);
}

function applyBatchEvent(db: Database.Database, recorded: RecordedEvent): void {
    const event = recorded as unknown as BatchEvent;
    // Status and stopping values come from the domain's transition table, never from literals here.
    const set = (assignments: string, params: object) =>
      statement(db, `UPDATE batches SET ${assignments} WHERE id = @batch_id`).run({ ...params, status: statusAfter(event.type), stopping: stoppingAfter(event.type) });
    switch (event.type) {
      case 'BatchCreated': {
        const data = event.data;
        statement(
          db,
          `INSERT INTO batches (id, input_file_id, endpoint, completion_window, job_id, model, price_1m_tokens, metadata, output_expires_after, status, created_at, expires_at, account_id)
           VALUES (@batch_id, @input_file_id, @endpoint, @completion_window, @job_id, @model, @price_1m_tokens, @metadata, @output_expires_after, @status, @created_at, @expires_at, @account_id)
           ON CONFLICT (id) DO NOTHING`,
        ).run({
          ...data,
          account_id: data.account_id ?? null,
          metadata: data.metadata === null ? null : JSON.stringify(data.metadata),
          output_expires_after: data.output_expires_after === null ? null : JSON.stringify(data.output_expires_after),
          status: statusAfter(event.type),
        });
        return;
      }
      case 'BatchValidated': {
        set('status = @status, in_progress_at = @in_progress_at, total = @total, input_blob_key = @input_blob_key, work_blob_key = @work_blob_key, estimated_tokens = @estimated_tokens', { work_blob_key: null, estimated_tokens: 0, ...event.data });
        const insert = statement(db, 'INSERT OR IGNORE INTO batch_chunks (batch_id, chunk, first_line, lines, start, end) VALUES (?, ?, ?, ?, ?, ?)');
        for (const chunk of event.data.chunks as ChunkSpec[]) insert.run(event.data.batch_id, chunk.index, chunk.first_line, chunk.lines, chunk.start, chunk.end);
        return;
      }
      case 'BatchFailed':
        set("status = @status, failed_at = @failed_at", event.data);
        for (const error of event.data.errors) addError(db, event.data.batch_id, error);
        return;
      case 'BatchCancelRequested':
        set("status = @status, stopping = @stopping, cancelling_at = @cancelling_at", event.data);
        return;
      case 'BatchExpiryStarted':
        set("stopping = @stopping", event.data);
        return;
      case 'BatchFinalizing':
        set("status = @status, finalizing_at = @finalizing_at", event.data);
        return;
      case 'BatchCompleted':
        set("status = @status, completed_at = @completed_at, output_file_id = @output_file_id, error_file_id = @error_file_id", event.data);
        return;
      case 'BatchCancelled':
        set("status = @status, cancelled_at = @cancelled_at, output_file_id = @output_file_id, error_file_id = @error_file_id", event.data);
        return;
      case 'BatchExpired':
        set("status = @status, expired_at = @expired_at, output_file_id = @output_file_id, error_file_id = @error_file_id", event.data);
        return;
    }
}

interface OutcomeCounters {
  completed: number;
  failed: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
}

/** What a run of line outcomes adds to each batch's counters, until written. */
class LineOutcomeCounts {
  private readonly byBatch = new Map<string, OutcomeCounters>();
  /** Lines answered per batch, checkpoint and sync (batch, checkpoint and sync id joined by NUL). */
  private readonly byCheckpoint = new Map<string, number>();
  /** Failed lines per line-outcome stream, so per chunk (most pages have none). */
  private readonly failedByStream = new Map<string, number>();

  failedIn(streamName: string): void {
    this.failedByStream.set(streamName, (this.failedByStream.get(streamName) ?? 0) + 1);
  }

  add(batchId: string, completed: boolean, usage: Usage, servedBy: ServedBy | undefined): void {
    if (servedBy) {
      const key = `${batchId}\u0000${servedBy.checkpoint}\u0000${servedBy.sync_id ?? ''}`;
      this.byCheckpoint.set(key, (this.byCheckpoint.get(key) ?? 0) + 1);
    }
    let counters = this.byBatch.get(batchId);
    if (!counters) {
      counters = { completed: 0, failed: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cached_tokens: 0, reasoning_tokens: 0 };
      this.byBatch.set(batchId, counters);
    }
    if (completed) counters.completed += 1;
    else counters.failed += 1;
    counters.prompt_tokens += usage.prompt_tokens;
    counters.completion_tokens += usage.completion_tokens;
    counters.total_tokens += usage.total_tokens;
    counters.cached_tokens += usage.cached_tokens ?? 0;
    counters.reasoning_tokens += usage.reasoning_tokens ?? 0;
  }

  write(db: Database.Database): void {
    for (const [batchId, counters] of this.byBatch) {
      statement(
        db,
        `UPDATE batches SET completed = completed + @completed, failed = failed + @failed,
           prompt_tokens = prompt_tokens + @prompt_tokens, completion_tokens = completion_tokens + @completion_tokens, total_tokens = total_tokens + @total_tokens,
           cached_tokens = cached_tokens + @cached_tokens, reasoning_tokens = reasoning_tokens + @reasoning_tokens
         WHERE id = @batch_id`,
      ).run({ batch_id: batchId, ...counters });
    }
    this.byBatch.clear();
    for (const [key, lines] of this.byCheckpoint) {
      const [batchId, checkpoint, syncId] = key.split('\u0000');
      statement(db, 'INSERT INTO batch_served_by (batch_id, checkpoint, sync_id, lines) VALUES (?, ?, ?, ?) ON CONFLICT (batch_id, checkpoint, sync_id) DO UPDATE SET lines = lines + excluded.lines').run(batchId, checkpoint, syncId, lines);
    }
    this.byCheckpoint.clear();
    for (const [streamName, failed] of this.failedByStream) {
      const stream = parseStreamName(streamName);
      if (stream?.kind === 'batchlines') statement(db, 'UPDATE batch_chunks SET failed = failed + ? WHERE batch_id = ? AND chunk = ?').run(failed, stream.id, stream.chunk);
    }
    this.failedByStream.clear();
  }
}

function applyLineOutcome(db: Database.Database, recorded: RecordedEvent, counts: LineOutcomeCounts): void {
  if (recorded.type !== 'LineCompleted' && recorded.type !== 'LineFailed') return;
  // The counters need no body: it is not parsed where the log's text lets it be left out (every
  // batch line's event passes here, its parsed body kept with the page the log's readers share).
  const fields = (recorded.serializedData !== undefined ? lineOutcomeFields(recorded.type, recorded.serializedData) : undefined) ?? (recorded.data as unknown as LineOutcomeFields);
  counts.add(fields.batch_id, recorded.type === 'LineCompleted', fields.usage, fields.served_by);
  if (recorded.type !== 'LineFailed') return;
  counts.failedIn(recorded.streamName);
  // An engine's error is in its body: the whole of it, then.
  const failed = 'error' in fields && fields.error !== null ? ({ ...fields, body: null } as LineFailedData) : (recorded.data as unknown as LineFailedData);
  addError(db, failed.batch_id, lineError(failed));
}

/**
 * Keeps the MAX_LISTED_ERRORS errors with the lowest line numbers (errors without a line last),
 * whatever order the lines settle in: a later error for an earlier line displaces the listed
 * error with the highest line. error_count counts them all.
 */
function addError(db: Database.Database, batchId: string, error: BatchError): void {
  const row = statement(db, 'SELECT error_count FROM batches WHERE id = ?').get(batchId) as { error_count: number } | undefined;
  if (!row) return;
  statement(db, 'UPDATE batches SET error_count = error_count + 1 WHERE id = ?').run(batchId);
  if (row.error_count >= MAX_LISTED_ERRORS) {
    const last = statement(
      db,
      'SELECT position, line FROM batch_errors WHERE batch_id = ? ORDER BY line IS NULL DESC, line DESC, position DESC LIMIT 1',
    ).get(batchId) as { position: number; line: number | null } | undefined;
    const sortsBefore = last !== undefined && error.line !== null && (last.line === null || error.line < last.line);
    if (!sortsBefore) return;
    statement(db, 'DELETE FROM batch_errors WHERE batch_id = ? AND position = ?').run(batchId, last.position);
  }
  statement(db, 'INSERT OR IGNORE INTO batch_errors (batch_id, position, code, line, message, param) VALUES (?, ?, ?, ?, ?, ?)').run(
    batchId,
    row.error_count,
    error.code,
    error.line,
    error.message,
    error.param,
  );
}

export interface BatchRow {
  readonly id: string;
  readonly input_file_id: string;
  readonly endpoint: string;
  readonly completion_window: string;
  readonly job_id: string;
  readonly model: string;
  readonly price_1m_tokens: number;
  readonly metadata: string | null;
  readonly output_expires_after: string | null;
  readonly status: BatchStatus;
  readonly stopping: 'cancelled' | 'expired' | null;
  readonly input_blob_key: string | null;
  /** The work file the chunks are cut from (prefix-aware order); null: the input file. */
  readonly work_blob_key: string | null;
  readonly created_at: number;
  readonly expires_at: number | null;
  readonly in_progress_at: number | null;
  readonly finalizing_at: number | null;
  readonly completed_at: number | null;
  readonly failed_at: number | null;
  readonly expired_at: number | null;
  readonly cancelling_at: number | null;
  readonly cancelled_at: number | null;
  readonly output_file_id: string | null;
  readonly error_file_id: string | null;
  readonly total: number;
  readonly completed: number;
  readonly failed: number;
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
  readonly cached_tokens: number;
  readonly reasoning_tokens: number;
  readonly error_count: number;
  /** The account that owns it (ACCOUNTS=required); null when accounts were off. */
  readonly account_id: string | null;
  /** Its input tokens as estimated at validation (0 before). */
  readonly estimated_tokens: number;
}

export interface ChunkRow {
  readonly batch_id: string;
  readonly chunk: number;
  readonly first_line: number;
  readonly lines: number;
  readonly start: number;
  readonly end: number;
  /** Its lines that failed so far (all of them settled once the batch is finalizing). */
  readonly failed: number;
}

export class BatchesQueries {
  private readonly stoppingCache = new Map<string, BatchRow['stopping'] | undefined>();
  private stoppingCacheAt = -1;

  constructor(
    private readonly db: Database.Database,
    /** The projector feeding `db`: its count of batch events applied says when the cache is stale. */
    private readonly projector: Pick<Projector, 'appliedCount'>,
  ) {}

  get(batchId: string): BatchRow | undefined {
    return statement(this.db, 'SELECT * FROM batches WHERE id = ?').get(batchId) as BatchRow | undefined;
  }

  /** How many batches are in each status. */
  countByStatus(): Array<{ status: string; count: number }> {
    return statement(this.db, 'SELECT status, COUNT(*) AS count FROM batches GROUP BY status').all() as Array<{ status: string; count: number }>;
  }

  /**
   * Whether the batch is winding down (undefined: no such batch). The runner asks before every
   * line it sends, so the answer is kept until the next batch event is projected: only those
   * change it, and line outcomes, the bulk of the log, leave it valid.
   */
  stopping(batchId: string): BatchRow['stopping'] | undefined {
    const applied = this.projector.appliedCount('batch');
    if (applied !== this.stoppingCacheAt) {
      this.stoppingCache.clear();
      this.stoppingCacheAt = applied;
    }
    if (this.stoppingCache.has(batchId)) return this.stoppingCache.get(batchId);
    const row = statement(this.db, 'SELECT stopping FROM batches WHERE id = ?').get(batchId) as { stopping: BatchRow['stopping'] } | undefined;
    this.stoppingCache.set(batchId, row?.stopping);
    return row?.stopping;
  }

  /** Lines answered per checkpoint and weight sync, most first (GET /v1/batches/{id}/served_by). */
  servedBy(batchId: string): Array<{ checkpoint: string; sync_id: string | null; lines: number }> {
    const rows = statement(this.db, 'SELECT checkpoint, sync_id, lines FROM batch_served_by WHERE batch_id = ? ORDER BY lines DESC, checkpoint, sync_id').all(batchId) as Array<{ checkpoint: string; sync_id: string; lines: number }>;
    return rows.map((row) => ({ ...row, sync_id: row.sync_id === '' ? null : row.sync_id }));
  }

  errors(batchId: string): BatchError[] {
    return statement(this.db, 'SELECT code, line, message, param FROM batch_errors WHERE batch_id = ? ORDER BY line IS NULL, line, position').all(batchId) as BatchError[];
  }

  /**
   * Newest first, after the batch `after` (exclusive); undefined when `after` is not a batch this
   * list holds. `owner`: only that account's batches (a string), or every batch (undefined).
   */
  list(limit: number, after?: string, owner?: string): { data: BatchRow[]; hasMore: boolean } | undefined {
    const mine = owner === undefined ? '' : 'account_id = @owner AND ';
    let rows: BatchRow[];
    if (after !== undefined) {
      const cursor = statement(this.db, `SELECT seq FROM batches WHERE ${mine}id = @after`).get({ owner, after }) as { seq: number } | undefined;
      if (!cursor) return undefined;
      rows = statement(this.db, `SELECT * FROM batches WHERE ${mine}seq < @seq ORDER BY seq DESC LIMIT @limit`).all({ owner, seq: cursor.seq, limit: limit + 1 }) as BatchRow[];
    } else {
      rows = statement(this.db, `SELECT * FROM batches ${owner === undefined ? '' : 'WHERE account_id = @owner '}ORDER BY seq DESC LIMIT @limit`).all({ owner, limit: limit + 1 }) as BatchRow[];
    }
    return { data: rows.slice(0, limit), hasMore: rows.length > limit };
  }

  withStatus(statuses: readonly BatchStatus[]): BatchRow[] {
    return statement(this.db, `SELECT * FROM batches WHERE status IN (${statuses.map(() => '?').join(', ')}) ORDER BY seq`).all(...statuses) as BatchRow[];
  }

  chunks(batchId: string): ChunkRow[] {
    return statement(this.db, 'SELECT * FROM batch_chunks WHERE batch_id = ? ORDER BY chunk').all(batchId) as ChunkRow[];
  }
}
