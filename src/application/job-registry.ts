import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import type { Clock } from '../platform/clock.js';
import { type JobDefinition, jobDecider } from '../domain/job.js';
import { jobStreamName } from '../domain/stream-names.js';
import type { Rejection } from '../domain/rejection.js';
import type { EventStore } from '../event-store/event-store.js';
import { type CommandMetadata, type ReadModelsPosition, execute, loadState } from './command-handler.js';

/** Job definitions: reserved by operators (or JOBS_FILE), looked up when batches are created. */
export class JobRegistry {
  constructor(private readonly deps: { eventStore: EventStore; projector: ReadModelsPosition; clock: Clock; log: Pick<Logger, 'warn'> }) {}

  /** Reserves a job id; the same definition again is accepted and changes nothing. */
  async reserve(job: JobDefinition, metadata: CommandMetadata): Promise<E.Either<Rejection, { job: JobDefinition; reservedAt: number; created: boolean }>> {
    const outcome = await execute(this.deps, jobStreamName(job.job_id), jobDecider, { type: 'ReserveJob', job, at: this.deps.clock.nowSeconds() }, { metadata });
    if (E.isLeft(outcome)) return outcome;
    const state = outcome.right.state;
    if (state.status !== 'reserved') throw new Error(`job ${job.job_id} is not reserved after reserving it`);
    return E.right({ job: state.job, reservedAt: state.reservedAt, created: outcome.right.events.length > 0 });
  }

  /** The job as the log has it (not the read model: batch creation must not race a reservation). */
  async find(jobId: string): Promise<JobDefinition | undefined> {
    const { state } = await loadState(this.deps.eventStore, jobStreamName(jobId), jobDecider);
    return state.status === 'reserved' ? state.job : undefined;
  }
}
