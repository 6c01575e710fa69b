// The Job definition aggregate: a job_id reserved ahead of time that ties batches to a model, a
// use case, an SLA and a price. Pure decide/evolve.
import * as E from 'fp-ts/lib/Either.js';
import type { Decider } from './decider.js';
import { type Rejection, reject } from './rejection.js';

export interface JobDefinition {
  /** Used exactly as supplied: no case folding, no trimming. */
  readonly job_id: string;
  readonly model: string;
  readonly use_case: string;
  /** How long a batch of this job may run: `<n>s`, `<n>m`, `<n>h` or `<n>d`, or `none`. */
  readonly sla: string;
  /** USD per 1,000,000 tokens. */
  readonly price_1m_tokens: number;
  /** The account whose batches may use it (ACCOUNTS=required); absent: none named. */
  readonly account_id?: string;
}

export type JobState = { readonly status: 'absent' } | { readonly status: 'reserved'; readonly job: JobDefinition; readonly reservedAt: number };

export const initialJobState: JobState = { status: 'absent' };

export type JobCommand = { readonly type: 'ReserveJob'; readonly job: JobDefinition; readonly at: number };

export type JobEvent = { readonly type: 'JobReserved'; readonly data: JobDefinition & { readonly reserved_at: number } };

const SLA = /^(\d{1,9})([smhd])$/;
const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** The SLA as seconds; null for `none` (the batch never expires). Undefined if malformed. */
export function slaSeconds(sla: string): number | null | undefined {
  if (sla === 'none') return null;
  const match = SLA.exec(sla);
  if (!match) return undefined;
  const seconds = Number(match[1]) * UNIT_SECONDS[match[2]!]!;
  return seconds > 0 ? seconds : undefined;
}

export function sameDefinition(a: JobDefinition, b: JobDefinition): boolean {
  return a.job_id === b.job_id && a.model === b.model && a.use_case === b.use_case && a.sla === b.sla && a.price_1m_tokens === b.price_1m_tokens && a.account_id === b.account_id;
}

export function decideJob(command: JobCommand, state: JobState): E.Either<Rejection, JobEvent[]> {
  const job = command.job;
  if (slaSeconds(job.sla) === undefined) {
    return reject('invalid', `Invalid sla ${JSON.stringify(job.sla)}: expected a duration such as 24h, 7d, 90m or 3600s, or none`, 'sla');
  }
  if (state.status === 'reserved') {
    // Re-posting the same definition is a no-op; a different one for the same id is refused.
    if (sameDefinition(state.job, job)) return E.right([]);
    return reject('conflict', `Job ${JSON.stringify(job.job_id)} is already reserved with a different definition`, 'job_id');
  }
  return E.right([{ type: 'JobReserved', data: { ...job, reserved_at: command.at } }]);
}

export function evolveJob(_state: JobState, event: JobEvent): JobState {
  const { reserved_at, ...job } = event.data;
  return { status: 'reserved', job, reservedAt: reserved_at };
}

export const jobDecider: Decider<JobCommand, JobState, JobEvent> = { decide: decideJob, evolve: evolveJob, initialState: initialJobState };
