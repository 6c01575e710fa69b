import { describe, expect, it } from 'vitest';
import { type BatchError, type BatchEvent, type BatchFacts, type BatchState, batchDecider } from '../../src/domain/batch.js';
import { deciderSpec } from '../support/decider-spec.js';

const spec = deciderSpec(batchDecider);
const batch_id = 'batch_1';
const facts: BatchFacts = {
  batch_id,
  input_file_id: 'file-in',
  endpoint: '/v1/chat/completions',
  completion_window: 'unlimited',
  job_id: 'job-demo',
  model: 'spool-tiny',
  price_1m_tokens: 0.5,
  metadata: null,
  output_expires_after: null,
  created_at: 100,
  expires_at: 200,
};
const validation = { total: 3, input_blob_key: 'files/file-in', chunks: [{ index: 0, first_line: 1, lines: 3, start: 0, end: 90 }] };
const errors: BatchError[] = [{ code: 'invalid_json', line: 2, message: 'Line 2 is not JSON', param: null }];
const files = { output_file_id: 'file-out', error_file_id: null };

const created: BatchEvent = { type: 'BatchCreated', data: facts };
const validated: BatchEvent = { type: 'BatchValidated', data: { batch_id, ...validation, in_progress_at: 110 } };
const failed = (at: number, why = errors): BatchEvent => ({ type: 'BatchFailed', data: { batch_id, failed_at: at, errors: why } });
const cancelRequested: BatchEvent = { type: 'BatchCancelRequested', data: { batch_id, cancelling_at: 120 } };
const expiryStarted: BatchEvent = { type: 'BatchExpiryStarted', data: { batch_id, at: 200 } };
const finalizing: BatchEvent = { type: 'BatchFinalizing', data: { batch_id, finalizing_at: 130 } };
const completed: BatchEvent = { type: 'BatchCompleted', data: { batch_id, ...files, completed_at: 140 } };
const cancelled: BatchEvent = { type: 'BatchCancelled', data: { batch_id, ...files, cancelled_at: 140 } };
const expired: BatchEvent = { type: 'BatchExpired', data: { batch_id, ...files, expired_at: 210 } };

/** Every way a batch ends, with the events that lead there. */
const FINAL: Record<string, BatchEvent[]> = {
  completed: [created, validated, finalizing, completed],
  cancelled: [created, validated, cancelRequested, cancelled],
  expired: [created, validated, expiryStarted, expired],
  failed: [created, failed(110)],
};

const state = (status: BatchState['status'], extra: Partial<Extract<BatchState, { facts: BatchFacts }>> = {}): BatchState =>
  ({ status, facts, validation: null, stopping: null, deadline_risk: null, ...extra }) as BatchState;

describe('Batch aggregate: creation', () => {
  it('creates a batch, validating', () => {
    spec.given([]).when({ type: 'CreateBatch', facts }).then([created]);
    spec.given([created]).thenState(state('validating'));
  });

  it('refuses to create the same batch twice', () => {
    spec.given([created]).when({ type: 'CreateBatch', facts }).thenRejects({ kind: 'conflict', param: 'batch_id' });
  });

  it('knows no other command on a batch that does not exist', () => {
    spec.given([]).when({ type: 'CancelBatch', at: 1 }).thenRejects({ kind: 'not_found', param: 'batch_id' });
    spec.given([]).when({ type: 'FailBatch', at: 1, errors }).thenRejects({ kind: 'not_found' });
  });

  it('ignores a later event on a stream that never had its BatchCreated', () => {
    spec.given([validated]).thenState({ status: 'absent' });
  });
});

describe('Batch aggregate: validation', () => {
  it('puts a valid batch in progress, split into its chunks', () => {
    spec.given([created]).when({ type: 'RecordValidation', at: 110, outcome: { ok: true, validation } }).then([validated]);
    spec.given([created, validated]).thenState(state('in_progress', { validation }));
  });

  it('fails an invalid batch with its errors', () => {
    spec.given([created]).when({ type: 'RecordValidation', at: 110, outcome: { ok: false, errors } }).then([failed(110)]);
    spec.given([created, failed(110)]).thenState(state('failed'));
  });

  it('records nothing when validation lands on a batch cancelled or expiring meanwhile (the finalizer winds it down)', () => {
    for (const outcome of [{ ok: true as const, validation }, { ok: false as const, errors }]) {
      spec.given([created, cancelRequested]).when({ type: 'RecordValidation', at: 130, outcome }).then([]);
      spec.given([created, expiryStarted]).when({ type: 'RecordValidation', at: 210, outcome }).then([]);
    }
    spec.given([created, cancelRequested]).thenState(state('cancelling', { stopping: 'cancelled' }));
    spec.given([created, expiryStarted]).thenState(state('validating', { stopping: 'expired' }));
  });

  it('records a repeated validation once', () => {
    spec.given([created, validated]).when({ type: 'RecordValidation', at: 111, outcome: { ok: true, validation } }).then([]);
    spec.given([created, failed(110)]).when({ type: 'RecordValidation', at: 111, outcome: { ok: false, errors } }).then([]);
  });
});

describe('Batch aggregate: cancel', () => {
  it('cancels a validating or in-progress batch', () => {
    spec.given([created]).when({ type: 'CancelBatch', at: 120 }).then([cancelRequested]);
    spec.given([created, validated]).when({ type: 'CancelBatch', at: 120 }).then([cancelRequested]);
    spec.given([created, validated, cancelRequested]).thenState(state('cancelling', { validation, stopping: 'cancelled' }));
  });

  it('takes a cancel over an expiry under way', () => {
    spec.given([created, validated, expiryStarted]).when({ type: 'CancelBatch', at: 120 }).then([cancelRequested]);
  });

  it('accepts a repeated cancel and records nothing', () => {
    spec.given([created, validated, cancelRequested]).when({ type: 'CancelBatch', at: 121 }).then([]);
    spec.given(FINAL.cancelled!).when({ type: 'CancelBatch', at: 150 }).then([]);
  });

  it('refuses to cancel a batch that is finalizing or ended otherwise', () => {
    spec.given([created, validated, finalizing]).when({ type: 'CancelBatch', at: 150 }).thenRejects({ kind: 'invalid_state', message: expect.stringContaining('finalizing') });
    for (const end of ['completed', 'expired', 'failed']) {
      spec.given(FINAL[end]!).when({ type: 'CancelBatch', at: 150 }).thenRejects({ kind: 'invalid_state', message: expect.stringContaining(end) });
    }
  });
});

describe('Batch aggregate: expiry', () => {
  it('starts the expiry of a validating or in-progress batch at or past its expires_at', () => {
    spec.given([created]).when({ type: 'StartExpiry', at: 200 }).then([expiryStarted]);
    spec.given([created, validated]).when({ type: 'StartExpiry', at: 200 }).then([expiryStarted]);
    spec.given([created, validated, expiryStarted]).thenState(state('in_progress', { validation, stopping: 'expired' }));
  });

  it('refuses before expires_at, and for a batch without one', () => {
    spec.given([created, validated]).when({ type: 'StartExpiry', at: 199 }).thenRejects({ kind: 'precondition_failed', param: 'batch_id' });
    const forever: BatchEvent = { type: 'BatchCreated', data: { ...facts, expires_at: null } };
    spec.given([forever, validated]).when({ type: 'StartExpiry', at: 10_000 }).thenRejects({ kind: 'precondition_failed' });
  });

  it('records nothing for a batch already winding down', () => {
    spec.given([created, validated, expiryStarted]).when({ type: 'StartExpiry', at: 201 }).then([]);
    spec.given([created, validated, cancelRequested]).when({ type: 'StartExpiry', at: 201 }).then([]);
  });

  it('records nothing for a batch finalizing or ended', () => {
    spec.given([created, validated, finalizing]).when({ type: 'StartExpiry', at: 201 }).then([]);
    for (const events of Object.values(FINAL)) spec.given(events).when({ type: 'StartExpiry', at: 300 }).then([]);
  });
});

describe('Batch aggregate: finalizing and finishing', () => {
  it('begins finalizing only an in-progress batch that is not winding down', () => {
    spec.given([created, validated]).when({ type: 'BeginFinalizing', at: 130 }).then([finalizing]);
    spec.given([created, validated, finalizing]).thenState(state('finalizing', { validation }));
    spec.given([created]).when({ type: 'BeginFinalizing', at: 130 }).then([]);
    spec.given([created, validated, cancelRequested]).when({ type: 'BeginFinalizing', at: 130 }).then([]);
    spec.given([created, validated, expiryStarted]).when({ type: 'BeginFinalizing', at: 210 }).then([]);
    spec.given([created, validated, finalizing]).when({ type: 'BeginFinalizing', at: 131 }).then([]);
    spec.given(FINAL.completed!).when({ type: 'BeginFinalizing', at: 150 }).then([]);
  });

  it('completes a finalizing batch', () => {
    spec.given([created, validated, finalizing]).when({ type: 'FinishBatch', at: 140, ...files }).then([completed]);
    spec.given(FINAL.completed!).thenState(state('completed', { validation }));
  });

  it('ends a cancelling batch cancelled, whether or not it was validated', () => {
    spec.given([created, validated, cancelRequested]).when({ type: 'FinishBatch', at: 140, ...files }).then([cancelled]);
    spec.given([created, cancelRequested]).when({ type: 'FinishBatch', at: 140, ...files }).then([cancelled]);
    spec.given(FINAL.cancelled!).thenState(state('cancelled', { validation, stopping: 'cancelled' }));
  });

  it('ends an expiring batch expired, whether or not it was validated', () => {
    spec.given([created, validated, expiryStarted]).when({ type: 'FinishBatch', at: 210, ...files }).then([expired]);
    spec.given([created, expiryStarted]).when({ type: 'FinishBatch', at: 210, ...files }).then([expired]);
    spec.given(FINAL.expired!).thenState(state('expired', { validation, stopping: 'expired' }));
  });

  it('refuses to finish a batch still running or validating with nothing winding it down', () => {
    spec.given([created, validated]).when({ type: 'FinishBatch', at: 140, ...files }).thenRejects({ kind: 'invalid_state', param: 'batch_id' });
    spec.given([created]).when({ type: 'FinishBatch', at: 140, ...files }).thenRejects({ kind: 'invalid_state' });
  });

  it('records nothing when an ended batch is finished again', () => {
    for (const events of Object.values(FINAL)) spec.given(events).when({ type: 'FinishBatch', at: 300, ...files }).then([]);
  });
});

describe('Batch aggregate: failure', () => {
  it('fails a batch that has not ended, wherever it is', () => {
    spec.given([created]).when({ type: 'FailBatch', at: 150, errors }).then([failed(150)]);
    spec.given([created, validated]).when({ type: 'FailBatch', at: 150, errors }).then([failed(150)]);
    spec.given([created, validated, cancelRequested]).when({ type: 'FailBatch', at: 150, errors }).then([failed(150)]);
    spec.given([created, validated, finalizing]).when({ type: 'FailBatch', at: 150, errors }).then([failed(150)]);
  });

  it('records nothing for a batch that has ended', () => {
    for (const events of Object.values(FINAL)) spec.given(events).when({ type: 'FailBatch', at: 300, errors }).then([]);
  });
});

describe('Batch aggregate: deadline risk', () => {
  // facts.expires_at is 200; the batch went in progress at 110.
  const flag = (at: number, estimated_completion_at: number, lines_done = 1) =>
    ({ type: 'FlagDeadlineRisk', at, estimated_completion_at, lines_done, lines_total: 3, lines_per_second: 0.01 }) as const;
  const atRisk = (at: number, estimated_completion_at: number, lines_done = 1): BatchEvent => ({
    type: 'BatchDeadlineAtRisk',
    data: { batch_id, at, estimated_completion_at, lines_done, lines_total: 3, lines_per_second: 0.01 },
  });

  it('flags an in-progress batch whose estimated completion is past its expires_at, its status unchanged', () => {
    spec.given([created, validated]).when(flag(150, 350)).then([atRisk(150, 350)]);
    spec.given([created, validated, atRisk(150, 350)]).thenState(state('in_progress', { validation, deadline_risk: { at: 150, estimated_completion_at: 350 } }));
  });

  it('refuses an estimate at or before expires_at, and a batch without one', () => {
    spec.given([created, validated]).when(flag(150, 200)).thenRejects({ kind: 'precondition_failed', param: 'estimated_completion_at' });
    const forever: BatchEvent = { type: 'BatchCreated', data: { ...facts, expires_at: null } };
    spec.given([forever, validated]).when(flag(150, 10_000)).thenRejects({ kind: 'precondition_failed' });
  });

  it('records nothing for a batch not in progress or winding down', () => {
    spec.given([created]).when(flag(105, 350)).then([]);
    spec.given([created, validated, cancelRequested]).when(flag(150, 350)).then([]);
    spec.given([created, validated, expiryStarted]).when(flag(150, 350)).then([]);
    spec.given([created, validated, finalizing]).when(flag(150, 350)).then([]);
    for (const events of Object.values(FINAL)) spec.given(events).when(flag(300, 400)).then([]);
  });

  it('records nothing again unless the estimate moved later by more than the larger of 10% of the time then left and five minutes', () => {
    // Flagged at 150 for 3150: 3000 s left, so only an estimate past 3150 + 300 counts.
    const flagged = [created, validated, atRisk(150, 3150)];
    spec.given(flagged).when(flag(160, 3150)).then([]);
    spec.given(flagged).when(flag(160, 1000)).then([]);
    spec.given(flagged).when(flag(160, 3450)).then([]);
    spec.given(flagged).when(flag(160, 3451, 2)).then([atRisk(160, 3451, 2)]);
    // Flagged at 150 for 30150: 30000 s left, so 10% of it (3000 s) is the bar.
    const far = [created, validated, atRisk(150, 30_150)];
    spec.given(far).when(flag(160, 33_150)).then([]);
    spec.given(far).when(flag(160, 33_151)).then([atRisk(160, 33_151)]);
  });

  it('measures the next slip from the latest flag', () => {
    spec.given([created, validated, atRisk(150, 3150), atRisk(160, 3451)]).when(flag(170, 3500)).then([]);
    spec.given([created, validated, atRisk(150, 3150), atRisk(160, 3451)]).thenState(state('in_progress', { validation, deadline_risk: { at: 160, estimated_completion_at: 3451 } }));
  });

  it('adds a few events, not thousands, for a 50,000-line batch whose rate sags for a day', () => {
    const lines_total = 50_000;
    const long: BatchEvent[] = [{ type: 'BatchCreated', data: { ...facts, created_at: 0, expires_at: 3600 } }, { type: 'BatchValidated', data: { batch_id, ...validation, total: lines_total, in_progress_at: 0 } }];
    let current = long.reduce(batchDecider.evolve, batchDecider.initialState);
    let done = 0;
    let flags = 0;
    // Checked every second for a day, the rate falling from 2 lines a second to nearly nothing.
    for (let at = 1; at <= 86_400 && done < lines_total; at++) {
      const rate = 2 / (1 + at / 600);
      done = Math.min(lines_total, done + rate);
      const estimated_completion_at = Math.ceil(at + (lines_total - done) / rate);
      if (estimated_completion_at <= 3600) continue;
      const decided = batchDecider.decide({ type: 'FlagDeadlineRisk', at, estimated_completion_at, lines_done: Math.floor(done), lines_total, lines_per_second: rate }, current);
      if (decided._tag === 'Left') throw new Error(decided.left.message);
      flags += decided.right.length;
      current = decided.right.reduce(batchDecider.evolve, current);
    }
    expect(flags).toBeGreaterThan(1);
    expect(flags).toBeLessThan(100);
  });
});
