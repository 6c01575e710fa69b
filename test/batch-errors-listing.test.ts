import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../src/event-store/event-store.js';
import { batchLinesStreamName } from '../src/domain/stream-names.js';
import { MAX_LISTED_ERRORS } from '../src/domain/batch-input.js';
import { BatchesQueries, batchesProjection } from '../projections/batches-projection.js';
import { batchObject } from '../src/http/routes/batches.js';
import { seededRandom } from './support/discrete-events.js';

const BATCH = 'batch_0123456789abcdef01234567';
let position = 0;
const recorded = (streamName: string, type: string, data: Record<string, unknown>): RecordedEvent =>
  ({ streamName, type, data, id: `e${position}`, metadata: {}, revision: 0n, position: BigInt(position++), recordedAt: 0 }) as unknown as RecordedEvent;

/** A batch of `lines` lines, all failed, whose outcomes are projected in the given order. */
function projectFailedBatch(lineOrder: number[], chunkLines: number) {
  const db = new Database(':memory:');
  batchesProjection.create(db);
  const apply = (event: RecordedEvent) => batchesProjection.apply(db, event);
  apply(
    recorded(`batch-${BATCH}`, 'BatchCreated', {
      batch_id: BATCH, input_file_id: 'file-x', endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'j', model: 'm',
      price_1m_tokens: 1, metadata: null, output_expires_after: null, created_at: 1, expires_at: null,
    }),
  );
  const chunks = Math.ceil(lineOrder.length / chunkLines);
  apply(
    recorded(`batch-${BATCH}`, 'BatchValidated', {
      batch_id: BATCH, in_progress_at: 2, total: lineOrder.length, input_blob_key: 'k',
      chunks: Array.from({ length: chunks }, (_, index) => ({ index, first_line: index * chunkLines + 1, lines: chunkLines, start: 0, end: 0 })),
    }),
  );
  for (const line of lineOrder) {
    apply(
      recorded(batchLinesStreamName(BATCH, Math.floor((line - 1) / chunkLines)), 'LineFailed', {
        batch_id: BATCH, line, custom_id: `r${line}`, request_id: null, status_code: 400,
        body: { error: { message: `refused line ${line}`, code: 'invalid_prompt', param: 'messages' } }, error: null,
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      }),
    );
  }
  // No projector feeds this store: the events were applied above, before any query.
  const queries = new BatchesQueries(db, { appliedCount: () => 0 });
  return batchObject(queries.get(BATCH)!, queries.errors(BATCH));
}

describe("a batch's errors.data", () => {
  it('lists the lowest failed lines in line order and says how many more there are, whatever order the lines settle in', () => {
    // 1,457 failed lines settling out of order: chunks of 100, the first two chunks last, lines shuffled within.
    const random = seededRandom(7);
    const lines = Array.from({ length: 1457 }, (_, index) => index + 1);
    const late = lines.filter((line) => line <= 200);
    const early = lines.filter((line) => line > 200).sort(() => random() - 0.5);
    const batch = projectFailedBatch([...early, ...late], 100);

    expect(batch.request_counts).toEqual({ completed: 0, failed: 1457, total: 1457 });
    expect(batch.errors.data).toHaveLength(MAX_LISTED_ERRORS);
    expect(batch.errors.data.map((error) => error.line)).toEqual(lines.slice(0, MAX_LISTED_ERRORS));
    expect(batch.errors.omitted).toBe(457);
    expect(batch.errors.data[0]).toEqual({ code: 'invalid_prompt', line: 1, message: 'refused line 1', param: 'messages' });
  });

  it('is complete, with nothing omitted, under the bound', () => {
    const batch = projectFailedBatch([5, 3, 9, 1], 2);
    expect(batch.errors.data.map((error) => error.line)).toEqual([1, 3, 5, 9]);
    expect(batch.errors.omitted).toBe(0);
  });
});

describe('the batches read model, a page at once', () => {
  it('ends as it does when every event is applied on its own, counters, errors and status alike', () => {
    const other = 'batch_fedcba9876543210fedcba98';
    const created = (batch: string) =>
      recorded(`batch-${batch}`, 'BatchCreated', {
        batch_id: batch, input_file_id: 'file-x', endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'j', model: 'm',
        price_1m_tokens: 1, metadata: null, output_expires_after: null, created_at: 1, expires_at: null,
      });
    const validated = (batch: string) =>
      recorded(`batch-${batch}`, 'BatchValidated', { batch_id: batch, in_progress_at: 2, total: 4, input_blob_key: 'k', chunks: [{ index: 0, first_line: 1, lines: 4, start: 0, end: 0 }] });
    const completed = (batch: string, line: number, cached?: number) =>
      recorded(batchLinesStreamName(batch, 0), 'LineCompleted', {
        batch_id: batch, line, custom_id: `r${line}`, request_id: `q${line}`, status_code: 200, body: {},
        usage: { prompt_tokens: 10 * line, completion_tokens: line, total_tokens: 11 * line, ...(cached === undefined ? {} : { cached_tokens: cached }) },
      });
    const failed = (batch: string, line: number) =>
      recorded(batchLinesStreamName(batch, 0), 'LineFailed', {
        batch_id: batch, line, custom_id: `r${line}`, request_id: null, status_code: 400,
        body: { error: { message: `refused line ${line}`, code: 'invalid_prompt', param: 'messages' } }, error: null,
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      });
    // Line outcomes of two batches interleaved, with batch events between them and at the end.
    const events = [
      created(BATCH), validated(BATCH), created(other), validated(other),
      completed(BATCH, 1, 5), completed(other, 1), failed(BATCH, 2), completed(other, 2, 7),
      recorded(`batch-${other}`, 'BatchCancelRequested', { batch_id: other, cancelling_at: 3 }),
      completed(BATCH, 3), failed(other, 3), completed(BATCH, 4),
      recorded(`batch-${BATCH}`, 'BatchFinalizing', { batch_id: BATCH, finalizing_at: 4 }),
    ];
    const project = (page: boolean) => {
      const db = new Database(':memory:');
      batchesProjection.create(db);
      if (page) batchesProjection.applyPage!(db, events);
      else for (const event of events) batchesProjection.apply(db, event);
      const queries = new BatchesQueries(db, { appliedCount: () => 0 });
      return [BATCH, other].map((batch) => batchObject(queries.get(batch)!, queries.errors(batch)));
    };
    const oneByOne = project(false);
    expect(oneByOne[0]).toMatchObject({ status: 'finalizing', request_counts: { completed: 3, failed: 1, total: 4 }, usage: { input_tokens: 80, input_tokens_details: { cached_tokens: 5 } } });
    expect(oneByOne[1]).toMatchObject({ status: 'cancelling', request_counts: { completed: 2, failed: 1, total: 4 }, usage: { input_tokens: 30, input_tokens_details: { cached_tokens: 7 } } });
    expect(project(true)).toEqual(oneByOne);
  });
});
