import type { FastifyInstance } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import type { BatchLifecycle, CreateBatchRequest } from '../../application/batch-lifecycle.js';
import type { BatchRow, BatchesQueries } from '../../../projections/batches-projection.js';
import type { OwnedObjects } from '../../../projections/owned-objects.js';
import type { Principal } from '../../domain/principal.js';
import { fromRejection, invalidRequest, notFound } from '../api-error.js';
import { httpSchema } from '../../platform/schemas.js';
import { markBatchCreated } from '../batch-trace-root.js';
import { pageBounds } from '../page-bounds.js';
import { requestMetadata } from '../request-metadata.js';

export interface BatchRouteDeps {
  readonly batches: BatchLifecycle;
  /** Batches, files and histories as the asking principal may see them (never the read models whole). */
  readonly owned: OwnedObjects;
}

/** The Batch object of spec §2.1, from the read model. */
export function batchObject(row: BatchRow, errors: ReturnType<BatchesQueries['errors']>) {
  return {
    id: row.id,
    object: 'batch' as const,
    completion_window: row.completion_window,
    created_at: row.created_at,
    endpoint: row.endpoint,
    job_id: row.job_id,
    input_file_id: row.input_file_id,
    request_counts: { completed: row.completed, failed: row.failed, total: row.total },
    status: row.status,
    cancelling_at: row.cancelling_at,
    cancelled_at: row.cancelled_at,
    in_progress_at: row.in_progress_at,
    finalizing_at: row.finalizing_at,
    completed_at: row.completed_at,
    failed_at: row.failed_at,
    expired_at: row.expired_at,
    expires_at: row.expires_at,
    output_file_id: row.output_file_id,
    error_file_id: row.error_file_id,
    // Spec §7 lists failed lines; the bound and the count beyond it say when the list is cut.
    errors: { object: 'list' as const, data: errors, omitted: Math.max(0, row.error_count - errors.length) },
    metadata: row.metadata === null ? {} : (JSON.parse(row.metadata) as Record<string, string>),
    model: row.model,
    price_1m_tokens: row.price_1m_tokens,
    processing_cost: (row.total_tokens * row.price_1m_tokens) / 1_000_000,
    // The spec's names and, beside them, the ones OpenAI's Batch schema requires.
    usage: {
      prompt_tokens: row.prompt_tokens,
      completion_tokens: row.completion_tokens,
      total_tokens: row.total_tokens,
      input_tokens: row.prompt_tokens,
      input_tokens_details: { cached_tokens: row.cached_tokens },
      output_tokens: row.completion_tokens,
      output_tokens_details: { reasoning_tokens: row.reasoning_tokens },
    },
  };
}

export function registerBatchRoutes(app: FastifyInstance, deps: BatchRouteDeps): void {
  const params = httpSchema('BatchIdParams');
  const batchResponse = { 200: httpSchema('Batch') };

  const findBatch = (principal: Principal, batchId: string) => {
    const row = deps.owned.batch(principal, batchId);
    if (!row) throw notFound(`No such batch: ${batchId}`, 'batch_id');
    return batchObject(row, deps.owned.batchErrors(row));
  };

  app.post(
    '/v1/batches',
    { schema: { summary: 'Create a batch', tags: ['batches'], body: httpSchema('CreateBatchRequest'), response: batchResponse } },
    async (request) => {
      const created = await deps.batches.create(request.body as CreateBatchRequest, requestMetadata(request), request.principal);
      if (E.isLeft(created)) throw fromRejection(created.left);
      markBatchCreated(request, created.right.batch_id);
      return findBatch(request.principal, created.right.batch_id);
    },
  );

  app.get(
    '/v1/batches',
    { schema: { summary: 'List batches, newest first', tags: ['batches'], querystring: httpSchema('ListBatchesQuery'), response: { 200: httpSchema('BatchList') } } },
    async (request) => {
      const query = request.query as { limit: number; after?: string };
      const after = query.after === '' ? undefined : query.after;
      const page = deps.owned.batches(request.principal, query.limit, after);
      if (!page) throw invalidRequest(`No batch with id ${query.after} to list after`, 'after');
      const data = page.data.map((row) => batchObject(row, deps.owned.batchErrors(row)));
      return { object: 'list' as const, data, ...pageBounds(data, after), has_more: page.hasMore };
    },
  );

  app.get(
    '/v1/batches/:batch_id',
    { schema: { summary: 'Retrieve a batch', tags: ['batches'], params, response: batchResponse } },
    async (request) => findBatch(request.principal, (request.params as { batch_id: string }).batch_id),
  );

  app.get(
    '/v1/batches/:batch_id/served_by',
    { schema: { summary: 'Lines of a batch per checkpoint that answered them', tags: ['batches'], params, response: { 200: httpSchema('BatchServedBy') } } },
    async (request) => {
      const batchId = (request.params as { batch_id: string }).batch_id;
      const row = deps.owned.batch(request.principal, batchId);
      if (!row) throw notFound(`No such batch: ${batchId}`, 'batch_id');
      return { object: 'list' as const, batch_id: row.id, data: deps.owned.batchServedBy(row).map((entry) => ({ object: 'batch.served_by' as const, ...entry })) };
    },
  );

  app.post(
    '/v1/batches/:batch_id/cancel',
    { schema: { summary: 'Cancel a batch', tags: ['batches'], params, response: batchResponse } },
    async (request) => {
      const batchId = (request.params as { batch_id: string }).batch_id;
      findBatch(request.principal, batchId); // another account's batch is unknown here, and is not touched
      const cancelled = await deps.batches.cancel(batchId, requestMetadata(request));
      if (E.isLeft(cancelled)) throw fromRejection(cancelled.left);
      return findBatch(request.principal, batchId);
    },
  );
}
