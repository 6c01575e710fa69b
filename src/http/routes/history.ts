import type { FastifyInstance } from 'fastify';
import type { HistoryQueries } from '../../../projections/history-projection.js';
import { positionToString } from '../../event-store/event-store.js';
import type { RecordedEvent } from '../../event-store/event-store.js';
import { invalidRequest, notFound } from '../api-error.js';
import { httpSchema } from '../http-schemas.js';

export interface HistoryRouteDeps {
  readonly history: HistoryQueries;
}

function historyEvent(event: RecordedEvent) {
  return {
    object: 'event' as const,
    id: event.id,
    type: event.type,
    schema_version: event.metadata.schemaVersion,
    stream: event.streamName,
    revision: Number(event.revision),
    position: positionToString(event.position),
    recorded_at: event.recordedAt,
    created_at: Math.floor(event.recordedAt / 1000),
    data: event.data,
    correlation_id: event.metadata.correlationId ?? null,
    request_id: event.metadata.requestId ?? null,
  };
}

/**
 * The audit trail: every event of a batch (line outcomes included), a file or a model's weight
 * syncs, oldest first, paginated like the other lists.
 */
export function registerHistoryRoutes(app: FastifyInstance, deps: HistoryRouteDeps): void {
  const querystring = httpSchema('HistoryQuery');
  const response = { 200: httpSchema('HistoryList') };

  const page = async (subject: string, query: { limit: number; after?: string }, missing: () => Error) => {
    const found = await deps.history.page(subject, query.limit, query.after);
    if (!found) throw query.after === undefined ? missing() : invalidRequest(`No event with id ${query.after} in this history to list after`, 'after');
    const data = found.events.map(historyEvent);
    return { object: 'list' as const, data, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null, has_more: found.hasMore };
  };

  app.get(
    '/v1/batches/:batch_id/events',
    { schema: { summary: "A batch's history: every event, line outcomes included", tags: ['audit'], params: httpSchema('BatchIdParams'), querystring, response } },
    async (request) => {
      const { batch_id: batchId } = request.params as { batch_id: string };
      return page(`batch:${batchId}`, request.query as { limit: number; after?: string }, () => notFound(`No such batch: ${batchId}`, 'batch_id'));
    },
  );

  app.get(
    '/v1/files/:file_id/events',
    { schema: { summary: "A file's history", tags: ['audit'], params: httpSchema('FileIdParams'), querystring, response } },
    async (request) => {
      const { file_id: fileId } = request.params as { file_id: string };
      return page(`file:${fileId}`, request.query as { limit: number; after?: string }, () => notFound(`No such file: ${fileId}`, 'file_id'));
    },
  );

  app.get(
    '/mgmt/v1/weights/:model/events',
    { schema: { summary: "A model's weight-sync history", tags: ['audit'], security: [{ bearer: [] }], params: httpSchema('ModelParams'), querystring, response } },
    async (request) => {
      const { model } = request.params as { model: string };
      return page(`weights:${model}`, request.query as { limit: number; after?: string }, () => notFound(`No weight sync history for model ${JSON.stringify(model)}`, 'model'));
    },
  );
}
