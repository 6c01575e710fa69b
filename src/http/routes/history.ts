import type { FastifyInstance } from 'fastify';
import type { HistoryQueries } from '../../../projections/history-projection.js';
import { positionToString } from '../../event-store/event-store.js';
import type { RecordedEvent } from '../../event-store/event-store.js';
import { invalidRequest, notFound } from '../api-error.js';
import { httpSchema } from '../../schemas.js';

export interface HistoryRouteDeps {
  readonly history: HistoryQueries;
}

function withoutSecret(data: Record<string, unknown>): Record<string, unknown> {
  const { secret: _secret, ...rest } = data;
  return rest;
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
    // A webhook's secret is shown once, when it is created; never in its history.
    data: event.type === 'WebhookRegistered' ? withoutSecret(event.data) : event.data,
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

  const histories = [
    { path: '/v1/batches/:batch_id/events', param: 'batch_id', params: 'BatchIdParams', subject: 'batch', summary: "A batch's history: every event, line outcomes included", missing: 'No such batch' },
    { path: '/v1/files/:file_id/events', param: 'file_id', params: 'FileIdParams', subject: 'file', summary: "A file's history", missing: 'No such file' },
    { path: '/mgmt/v1/webhooks/:webhook_id/events', param: 'webhook_id', params: 'WebhookIdParams', subject: 'webhook', summary: "A webhook's history: its registration and every delivery attempt", missing: 'No such webhook' },
    { path: '/mgmt/v1/weights/:model/events', param: 'model', params: 'ModelParams', subject: 'weights', summary: "A model's weight-sync history", missing: 'No weight-sync history for model' },
  ] as const;
  for (const history of histories) {
    const security = history.path.startsWith('/mgmt/') ? { security: [{ bearer: [] }] } : {};
    app.get(
      history.path,
      { schema: { summary: history.summary, tags: ['audit'], ...security, params: httpSchema(history.params), querystring, response } },
      async (request) => {
        const id = (request.params as Record<string, string>)[history.param]!;
        return page(`${history.subject}:${id}`, request.query as { limit: number; after?: string }, () => notFound(`${history.missing}: ${id}`, history.param));
      },
    );
  }
}
