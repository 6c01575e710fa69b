// The Batch aggregate (stream batch-<id>): lifecycle only. Line outcomes live in their own
// streams (batchlines-<id>-<chunk>) so that a 50,000-line batch never makes this one slow to load.
import * as E from 'fp-ts/lib/Either.js';
import type { Decider } from './decider.js';
import { type Rejection, reject } from './rejection.js';

/** How many of a batch's lines one checkpoint answered, and the weight sync that put it on the replica (null: none). */
export interface CheckpointLines {
  readonly checkpoint: string;
  readonly sync_id: string | null;
  readonly lines: number;
}

export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

export type BatchStatus = 'validating' | 'failed' | 'in_progress' | 'finalizing' | 'completed' | 'expired' | 'cancelling' | 'cancelled';
export const FINAL_STATUSES: readonly BatchStatus[] = ['failed', 'completed', 'expired', 'cancelled'];
/** Where a cancel or an expiry may still start: the batch has not begun finalizing nor ended. */
export const STOPPABLE_STATUSES: readonly BatchStatus[] = ['validating', 'in_progress'];

export interface BatchError {
  readonly code: string;
  readonly line: number | null;
  readonly message: string;
  readonly param: string | null;
}

export interface OutputExpiresAfter {
  readonly anchor: 'created_at';
  readonly seconds: number;
}

export interface BatchFacts {
  readonly batch_id: string;
  readonly input_file_id: string;
  readonly endpoint: BatchEndpoint;
  readonly completion_window: 'unlimited';
  readonly job_id: string;
  readonly model: string;
  readonly price_1m_tokens: number;
  readonly metadata: Readonly<Record<string, string>> | null;
  readonly output_expires_after: OutputExpiresAfter | null;
  readonly created_at: number;
  readonly expires_at: number | null;
  /** The account that owns it, its output and error files (ACCOUNTS=required); absent when accounts are off. */
  readonly account_id?: string;
}

/**
 * A run of consecutive lines processed as one unit of work: of the input file, or of the batch's
 * work file when it has one (then its lines are in prefix-aware order, each naming its input line).
 */
export interface ChunkSpec {
  readonly index: number;
  /** 1-based physical line number of the chunk's first line in the input file. */
  readonly first_line: number;
  /** Requests in the chunk (blank lines are not requests). */
  readonly lines: number;
  /** Byte range of the chunk in the input file, or in the work file if there is one: [start, end). */
  readonly start: number;
  readonly end: number;
}

export interface Validation {
  readonly total: number;
  readonly input_blob_key: string;
  readonly chunks: readonly ChunkSpec[];
  /** The work file the chunks are cut from (lines laid out in prefix-aware order); absent: the input file. */
  readonly work_blob_key?: string;
  /** Its input tokens, estimated (account-quota.ts): what it adds to its account's queued tokens. */
  readonly estimated_tokens?: number;
}

export type BatchState =
  | { readonly status: 'absent' }
  | {
      readonly status: BatchStatus;
      readonly facts: BatchFacts;
      readonly validation: Validation | null;
      /** Why the batch is winding down before all its lines ran. */
      readonly stopping: 'cancelled' | 'expired' | null;
      /** The latest deadline-risk flag: a new one must slip materially past it. */
      readonly deadline_risk: DeadlineRiskFlag | null;
    };

export interface DeadlineRiskFlag {
  readonly at: number;
  readonly estimated_completion_at: number;
}

/** A batch's progress and where it leads at its current rate (Unix seconds, lines per second). */
export interface DeadlineRiskEstimate {
  readonly at: number;
  readonly estimated_completion_at: number;
  readonly lines_done: number;
  readonly lines_total: number;
  readonly lines_per_second: number;
}

/**
 * How much later than the last flag a new estimate must be to be flagged again: the larger of a
 * tenth of the time that flag gave the batch, and five minutes. The tenth keeps a steady slip to a
 * handful of flags (each one grows the bar with the estimate); the five minutes keep an estimate
 * that jitters near its own completion from adding an event per check. A watch checking every
 * second a batch of any size thus adds tens of events at most, never one per line or per check.
 */
export const DEADLINE_RISK_SLIP_FRACTION = 0.1;
export const DEADLINE_RISK_MIN_SLIP_SECONDS = 300;

export function slipsMaterially(previous: DeadlineRiskFlag, estimated_completion_at: number): boolean {
  const bar = Math.max(DEADLINE_RISK_SLIP_FRACTION * (previous.estimated_completion_at - previous.at), DEADLINE_RISK_MIN_SLIP_SECONDS);
  return estimated_completion_at > previous.estimated_completion_at + bar;
}

export const initialBatchState: BatchState = { status: 'absent' };

export type BatchCommand =
  | { readonly type: 'CreateBatch'; readonly facts: BatchFacts }
  | { readonly type: 'RecordValidation'; readonly at: number; readonly outcome: { readonly ok: true; readonly validation: Validation } | { readonly ok: false; readonly errors: readonly BatchError[] } }
  | { readonly type: 'CancelBatch'; readonly at: number }
  | { readonly type: 'StartExpiry'; readonly at: number }
  | { readonly type: 'BeginFinalizing'; readonly at: number }
  | ({ readonly type: 'FlagDeadlineRisk' } & DeadlineRiskEstimate)
  | {
      readonly type: 'FinishBatch';
      readonly at: number;
      readonly output_file_id: string | null;
      readonly error_file_id: string | null;
      /** Lines per checkpoint that answered them, for the terminal event (and the batch-events topic). */
      readonly served_by?: readonly CheckpointLines[];
    }
  | { readonly type: 'FailBatch'; readonly at: number; readonly errors: readonly BatchError[] };

type Id = { readonly batch_id: string };
export type BatchEvent =
  | { readonly type: 'BatchCreated'; readonly data: BatchFacts }
  | { readonly type: 'BatchValidated'; readonly data: Id & Validation & { readonly in_progress_at: number } }
  | { readonly type: 'BatchFailed'; readonly data: Id & { readonly failed_at: number; readonly errors: readonly BatchError[] } }
  | { readonly type: 'BatchCancelRequested'; readonly data: Id & { readonly cancelling_at: number } }
  | { readonly type: 'BatchExpiryStarted'; readonly data: Id & { readonly at: number } }
  | { readonly type: 'BatchDeadlineAtRisk'; readonly data: Id & DeadlineRiskEstimate }
  | { readonly type: 'BatchFinalizing'; readonly data: Id & { readonly finalizing_at: number } }
  | { readonly type: 'BatchCompleted'; readonly data: Id & BatchFiles & { readonly completed_at: number } }
  | { readonly type: 'BatchCancelled'; readonly data: Id & BatchFiles & { readonly cancelled_at: number } }
  | { readonly type: 'BatchExpired'; readonly data: Id & BatchFiles & { readonly expired_at: number } };

interface BatchFiles {
  readonly output_file_id: string | null;
  readonly error_file_id: string | null;
}

export type BatchEventType = BatchEvent['type'];

/**
 * What each batch event does to the batch's status and to why it is winding down; null leaves it
 * as it was (an expiry winds a batch down in the status it has). The one table of batch status
 * transitions: the aggregate, the read model and the public batch-events topic all read it.
 */
const TRANSITIONS: Readonly<Record<BatchEventType, { readonly status: BatchStatus | null; readonly stopping: 'cancelled' | 'expired' | null }>> = {
  BatchCreated: { status: 'validating', stopping: null },
  BatchValidated: { status: 'in_progress', stopping: null },
  BatchFailed: { status: 'failed', stopping: null },
  BatchCancelRequested: { status: 'cancelling', stopping: 'cancelled' },
  BatchExpiryStarted: { status: null, stopping: 'expired' },
  // A warning on the record: the batch runs on as it was.
  BatchDeadlineAtRisk: { status: null, stopping: null },
  BatchFinalizing: { status: 'finalizing', stopping: null },
  BatchCompleted: { status: 'completed', stopping: null },
  BatchCancelled: { status: 'cancelled', stopping: null },
  BatchExpired: { status: 'expired', stopping: null },
};

export function isBatchEventType(type: string): type is BatchEventType {
  return Object.hasOwn(TRANSITIONS, type);
}

/** The status a batch has after an event of this type; null: the event leaves it unchanged. */
export function statusAfter(eventType: BatchEventType): BatchStatus | null {
  return TRANSITIONS[eventType].status;
}

/** Why the batch winds down after an event of this type; null: the event leaves that unchanged. */
export function stoppingAfter(eventType: BatchEventType): 'cancelled' | 'expired' | null {
  return TRANSITIONS[eventType].stopping;
}

/** Whether the batch's lines may be sent to the engine (a cancelling batch records the lines left as cancelled). */
export function runsLines(status: BatchStatus): boolean {
  return status === 'in_progress' || status === 'cancelling';
}

/**
 * Whether a validation's result may still land: the batch is validating and nothing winds it
 * down (a batch cancelled or expiring while it was validated is wound down by the finalizer).
 */
export function awaitsValidation(batch: { readonly status: BatchStatus; readonly stopping: 'cancelled' | 'expired' | null }): boolean {
  return batch.status === 'validating' && !batch.stopping;
}

/** Whether every line settled moves the batch on to finalizing: it runs and nothing winds it down. */
export function mayBeginFinalizing(batch: { readonly status: BatchStatus; readonly stopping: 'cancelled' | 'expired' | null }): boolean {
  return batch.status === 'in_progress' && !batch.stopping;
}

/**
 * Whether the batch can be finished now: every line has its outcome, or it was wound down before
 * it ran (validation never split it into lines).
 */
export function readyToFinish(batch: {
  readonly status: BatchStatus;
  readonly stopping: 'cancelled' | 'expired' | null;
  readonly settled: number;
  readonly total: number;
}): boolean {
  if (batch.status === 'validating') return batch.stopping !== null;
  if (batch.status !== 'in_progress' && batch.status !== 'finalizing' && batch.status !== 'cancelling') return false;
  return batch.settled >= batch.total;
}

const notFound = (command: BatchCommand) =>
  reject('not_found', `No such batch${'facts' in command ? `: ${command.facts.batch_id}` : ''}`, 'batch_id');

export function decideBatch(command: BatchCommand, state: BatchState): E.Either<Rejection, BatchEvent[]> {
  if (command.type === 'CreateBatch') {
    if (state.status !== 'absent') return reject('conflict', `Batch ${command.facts.batch_id} already exists`, 'batch_id');
    return E.right([{ type: 'BatchCreated', data: command.facts }]);
  }
  if (state.status === 'absent') return notFound(command);
  const batch_id = state.facts.batch_id;
  const final = FINAL_STATUSES.includes(state.status);
  switch (command.type) {
    case 'RecordValidation':
      if (!awaitsValidation(state)) return E.right([]);
      return E.right([
        command.outcome.ok
          ? { type: 'BatchValidated', data: { batch_id, ...command.outcome.validation, in_progress_at: command.at } }
          : { type: 'BatchFailed', data: { batch_id, failed_at: command.at, errors: command.outcome.errors } },
      ]);
    case 'CancelBatch':
      if (state.status === 'cancelling' || state.status === 'cancelled') return E.right([]);
      if (!STOPPABLE_STATUSES.includes(state.status)) {
        return reject('invalid_state', `Cannot cancel a batch that is ${state.status}: only validating or in_progress batches can be cancelled`, 'batch_id');
      }
      return E.right([{ type: 'BatchCancelRequested', data: { batch_id, cancelling_at: command.at } }]);
    case 'StartExpiry':
      if (state.stopping || !STOPPABLE_STATUSES.includes(state.status)) return E.right([]);
      if (state.facts.expires_at === null || state.facts.expires_at > command.at) {
        return reject('precondition_failed', `Batch ${batch_id} has not reached its expires_at`, 'batch_id');
      }
      return E.right([{ type: 'BatchExpiryStarted', data: { batch_id, at: command.at } }]);
    case 'FlagDeadlineRisk': {
      // The watch reads a read model that may lag: a batch that moved on meanwhile is no longer at risk.
      if (state.status !== 'in_progress' || state.stopping) return E.right([]);
      if (state.facts.expires_at === null || command.estimated_completion_at <= state.facts.expires_at) {
        return reject('precondition_failed', `Batch ${batch_id} is estimated to finish by its expires_at`, 'estimated_completion_at');
      }
      if (state.deadline_risk && !slipsMaterially(state.deadline_risk, command.estimated_completion_at)) return E.right([]);
      const { type: _type, ...estimate } = command;
      return E.right([{ type: 'BatchDeadlineAtRisk', data: { batch_id, ...estimate } }]);
    }
    case 'BeginFinalizing':
      if (!mayBeginFinalizing(state)) return E.right([]);
      return E.right([{ type: 'BatchFinalizing', data: { batch_id, finalizing_at: command.at } }]);
    case 'FinishBatch': {
      const files = { output_file_id: command.output_file_id, error_file_id: command.error_file_id, ...(command.served_by && command.served_by.length > 0 ? { served_by: command.served_by } : {}) };
      if (state.status === 'finalizing') return E.right([{ type: 'BatchCompleted', data: { batch_id, ...files, completed_at: command.at } }]);
      if (state.status === 'cancelling') return E.right([{ type: 'BatchCancelled', data: { batch_id, ...files, cancelled_at: command.at } }]);
      if (state.stopping === 'expired' && !final) return E.right([{ type: 'BatchExpired', data: { batch_id, ...files, expired_at: command.at } }]);
      if (final) return E.right([]);
      return reject('invalid_state', `Batch ${batch_id} is ${state.status}, not ready to finish`, 'batch_id');
    }
    case 'FailBatch':
      if (final) return E.right([]);
      return E.right([{ type: 'BatchFailed', data: { batch_id, failed_at: command.at, errors: command.errors } }]);
  }
}

export function evolveBatch(state: BatchState, event: BatchEvent): BatchState {
  if (event.type === 'BatchCreated') return { status: statusAfter(event.type)!, facts: event.data, validation: null, stopping: null, deadline_risk: null };
  if (state.status === 'absent') return state;
  const validation =
    event.type === 'BatchValidated'
      ? {
          total: event.data.total,
          input_blob_key: event.data.input_blob_key,
          chunks: event.data.chunks,
          ...(event.data.work_blob_key !== undefined ? { work_blob_key: event.data.work_blob_key } : {}),
        }
      : state.validation;
  const deadline_risk =
    event.type === 'BatchDeadlineAtRisk' ? { at: event.data.at, estimated_completion_at: event.data.estimated_completion_at } : state.deadline_risk;
  return { ...state, status: statusAfter(event.type) ?? state.status, stopping: stoppingAfter(event.type) ?? state.stopping, validation, deadline_risk };
}

/** The status a batch ends in once a wind-down finishes. */
export function stoppingCode(stopping: 'cancelled' | 'expired'): string {
  return stopping === 'cancelled' ? 'batch_cancelled' : 'batch_expired';
}

export const batchDecider: Decider<BatchCommand, BatchState, BatchEvent> = { decide: decideBatch, evolve: evolveBatch, initialState: initialBatchState };
