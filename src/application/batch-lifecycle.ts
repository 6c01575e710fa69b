import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import type { Clock } from '../platform/clock.js';
import {
  type BatchCommand,
  type BatchEndpoint,
  type BatchEvent,
  type BatchFacts,
  type BatchState,
  type OutputExpiresAfter,
  batchDecider,
} from '../domain/batch.js';
import { fileDecider } from '../domain/file.js';
import { slaSeconds } from '../domain/job.js';
import { OPEN_PRINCIPAL, type Principal, maySee, ownerOf } from '../domain/principal.js';
import { batchStreamName, fileStreamName } from '../domain/stream-names.js';
import { type Rejection, reject } from '../domain/rejection.js';
import type { EventStore } from '../event-store/event-store.js';
import { newBatchId } from '../platform/ids.js';
import { type CommandMetadata, type Handled, type ReadModelsPosition, execute, loadState } from './command-handler.js';
import type { JobRegistry } from './job-registry.js';

export interface CreateBatchRequest {
  readonly input_file_id: string;
  readonly endpoint: BatchEndpoint;
  readonly completion_window: 'unlimited';
  readonly job_id: string;
  readonly metadata?: Record<string, string> | null;
  readonly output_expires_after?: OutputExpiresAfter | null;
}

/** Commands on batches, from clients (create, cancel) and from the processors. */
export class BatchLifecycle {
  constructor(private readonly deps: { eventStore: EventStore; projector: ReadModelsPosition; jobs: JobRegistry; clock: Clock; log: Pick<Logger, 'warn'> }) {}

  /** Creates a batch for the principal: its input file must be one the principal may see, and the batch is the principal's account's. */
  async create(request: CreateBatchRequest, metadata: CommandMetadata, principal: Principal = OPEN_PRINCIPAL): Promise<E.Either<Rejection, BatchFacts>> {
    const now = this.deps.clock.nowSeconds();
    const job = await this.deps.jobs.find(request.job_id);
    // With accounts, a job is its account's alone: another account's is answered as an unknown one.
    if (!job || (principal.kind === 'account' && job.account_id !== principal.accountId)) {
      return reject('invalid', `Unknown job_id ${JSON.stringify(request.job_id)}: a job must be reserved for the account before batches can use it`, 'job_id');
    }
    const { state: file } = await loadState(this.deps.eventStore, fileStreamName(request.input_file_id), fileDecider);
    // Another account's file is answered as a file never uploaded.
    if (file.status !== 'active' || (file.file.expiresAt !== null && file.file.expiresAt <= now) || !maySee(principal, file.file.accountId)) {
      return reject('invalid', `No such File object: ${request.input_file_id}`, 'input_file_id');
    }
    if (file.file.purpose !== 'batch') {
      return reject('invalid', `File ${request.input_file_id} has purpose ${file.file.purpose}; a batch input file must have purpose batch`, 'input_file_id');
    }
    const sla = slaSeconds(job.sla) ?? null;
    const facts: BatchFacts = {
      batch_id: newBatchId(),
      input_file_id: request.input_file_id,
      endpoint: request.endpoint,
      completion_window: request.completion_window,
      job_id: job.job_id,
      model: job.model,
      price_1m_tokens: job.price_1m_tokens,
      metadata: request.metadata ?? null,
      output_expires_after: request.output_expires_after ?? null,
      created_at: now,
      expires_at: sla === null ? null : now + sla,
      ...(ownerOf(principal) !== undefined ? { account_id: ownerOf(principal)! } : {}),
    };
    // The batch id was minted just now: its stream is new.
    const outcome = await execute(this.deps, batchStreamName(facts.batch_id), batchDecider, { type: 'CreateBatch', facts }, { metadata, newStream: true });
    return E.map(() => facts)(outcome);
  }

  cancel(batchId: string, metadata: CommandMetadata): Promise<E.Either<Rejection, Handled<BatchState, BatchEvent>>> {
    return this.run(batchId, { type: 'CancelBatch', at: this.deps.clock.nowSeconds() }, metadata);
  }

  async state(batchId: string): Promise<BatchState> {
    return (await loadState(this.deps.eventStore, batchStreamName(batchId), batchDecider)).state;
  }

  /** Runs a command on the batch's stream; the read models hold its events when this returns. */
  async run(batchId: string, command: BatchCommand, metadata: CommandMetadata): Promise<E.Either<Rejection, Handled<BatchState, BatchEvent>>> {
    return execute(this.deps, batchStreamName(batchId), batchDecider, command, { metadata });
  }
}
