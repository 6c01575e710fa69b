import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { HistoryFeed } from '../../../projections/history-feed.js';
import type { OwnedObjects } from '../../../projections/owned-objects.js';
import type { Principal } from '../../domain/principal.js';
import { FINAL_STATUSES, isBatchEventType, statusAfter } from '../../domain/batch.js';
import { positionToString } from '../../event-store/event-store.js';
import type { RecordedEvent } from '../../event-store/event-store.js';
import { invalidRequest, notFound } from '../api-error.js';
import type { HttpTimeouts } from '../http-settings.js';
import { httpSchema } from '../../platform/schemas.js';
import { EventStreamResponse } from '../event-stream.js';

export interface HistoryRouteDeps {
  /** Batches, files and histories as the asking principal may see them (never the read models whole). */
  readonly owned: OwnedObjects;
  readonly historyFeed: HistoryFeed;
  readonly timeouts: Pick<HttpTimeouts, 'eventStreamHeartbeatMs'>;
}

function withoutSecret(data: Record<string, unknown>): Record<string, unknown> {
  const { secret: _secret, ...rest } = data;
  return rest;
}

const EVENT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The batch's last event: once it is sent, nothing more of the batch's own comes. */
const endsTheBatch = (type: string) => isBatchEventType(type) && FINAL_STATUSES.includes(statusAfter(type) ?? 'validating');

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
    // Who asked for it, where accounts are required (absent with accounts off).
    ...(event.metadata.accountId !== undefined ? { account_id: event.metadata.accountId, key_id: event.metadata.keyId ?? null } : {}),
  };
}

/**
 * The audit trail: every event of a batch (line outcomes included), a file or a model's weight
 * syncs, oldest first, paginated like the other lists.
 */
export function registerHistoryRoutes(app: FastifyInstance, deps: HistoryRouteDeps): void {
  const response = { 200: httpSchema('HistoryList') };
  // The batch's history also answers as a stream: the description lists both media types.
  const streamDocs = {
    openapi: {
      responses: {
        200: {
          description: 'A page of events; with stream=true, server-sent events (id: the event id, event: its type, data: the event as one item of the list), a heartbeat comment every 15 s, closed after the terminal event',
          content: {
            'application/json': { schema: httpSchema('HistoryList') },
            'text/event-stream': { schema: { type: 'string', description: 'id: <event id>\\nevent: <type>\\ndata: <HistoryEvent as JSON>\\n\\n, repeated' } },
          },
        },
      },
    },
  };

  const page = async (principal: Principal, subject: string, query: { limit: number; after?: string; lines?: string }, missing: () => Error) => {
    const found = await deps.owned.history(principal, subject, query.limit, query.after, query.lines === 'false');
    // Another account's subject is missing, whatever the cursor.
    if (!found) throw query.after === undefined || !deps.owned.knowsHistory(principal, subject) ? missing() : invalidRequest(`No event with id ${query.after} in this history to list after`, 'after');
    const data = found.events.map(historyEvent);
    return { object: 'list' as const, data, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null, has_more: found.hasMore };
  };

  const open = new Set<EventStreamResponse>();
  // A stream lasts as long as its batch: the server ends them when it stops, or it would wait.
  app.addHook('preClose', async () => {
    for (const stream of open) stream.end();
  });

  /**
   * The batch's history as server-sent events, from the cursor (Last-Event-ID, else `after`, else
   * the start) until its terminal event. A wrong cursor is refused in the envelope before the
   * stream starts.
   */
  const streamBatch = async (request: FastifyRequest, reply: FastifyReply, batchId: string, after: string | undefined) => {
    // An empty Last-Event-ID is what a client that received nothing yet may send: the start.
    const lastEventId = request.headers['last-event-id'] || undefined;
    if (typeof lastEventId === 'string' && !EVENT_ID.test(lastEventId)) throw invalidRequest(`Last-Event-ID must be an event id (a UUID) of this batch, not ${JSON.stringify(lastEventId.slice(0, 64))}`, 'Last-Event-ID');
    const cursor = typeof lastEventId === 'string' ? lastEventId : after;
    const subject = `batch:${batchId}`;
    if (!deps.owned.knowsHistory(request.principal, subject)) throw notFound(`No such batch: ${batchId}`, 'batch_id');
    if (cursor !== undefined && !deps.owned.knowsHistory(request.principal, subject, cursor)) {
      throw cursor === lastEventId
        ? invalidRequest(`No event with id ${cursor} (Last-Event-ID) in this history to resume after`, 'Last-Event-ID')
        : invalidRequest(`No event with id ${cursor} in this history to list after`, 'after');
    }
    const stream = new EventStreamResponse(reply, deps.timeouts.eventStreamHeartbeatMs);
    open.add(stream);
    try {
      for await (const events of deps.historyFeed.follow(subject, cursor, stream.closed)) {
        const end = events.findIndex((event) => endsTheBatch(event.type));
        const sent = end < 0 ? events : events.slice(0, end + 1);
        await stream.send(sent.map((event) => ({ id: event.id, event: event.type, data: historyEvent(event) })));
        if (end >= 0) break;
      }
    } catch (error) {
      // The answer has started: all that is left to do is log and close.
      request.log.error({ err: error, batch_id: batchId }, 'event stream stopped');
    } finally {
      open.delete(stream);
      stream.end();
    }
  };

  const histories = [
    { path: '/v1/batches/:batch_id/events', param: 'batch_id', params: 'BatchIdParams', query: 'BatchHistoryQuery', subject: 'batch', summary: "A batch's history: every event, line outcomes included; with stream=true, live as server-sent events", missing: 'No such batch' },
    { path: '/v1/files/:file_id/events', param: 'file_id', params: 'FileIdParams', query: 'HistoryQuery', subject: 'file', summary: "A file's history", missing: 'No such file' },
    { path: '/mgmt/v1/webhooks/:webhook_id/events', param: 'webhook_id', params: 'WebhookIdParams', query: 'HistoryQuery', subject: 'webhook', summary: "A webhook's history: its registration and every delivery attempt", missing: 'No such webhook' },
    { path: '/mgmt/v1/weights/:model/events', param: 'model', params: 'ModelParams', query: 'HistoryQuery', subject: 'weights', summary: "A model's weight-sync history", missing: 'No weight-sync history for model' },
  ] as const;
  for (const history of histories) {
    const security = history.path.startsWith('/mgmt/') ? { security: [{ bearer: [] }] } : {};
    app.get(
      history.path,
      {
        schema: { summary: history.summary, tags: ['audit'], ...security, params: httpSchema(history.params), querystring: httpSchema(history.query), response },
        ...(history.subject === 'batch' ? { config: streamDocs } : {}),
      },
      async (request, reply) => {
        const id = (request.params as Record<string, string>)[history.param]!;
        const query = request.query as { limit: number; after?: string; stream?: string; lines?: string };
        // A HEAD asks for the headers only: it gets the list's, not a stream held open to the batch's end.
        if (history.subject === 'batch' && query.stream === 'true' && request.method === 'GET') return streamBatch(request, reply, id, query.after);
        return page(request.principal, `${history.subject}:${id}`, query, () => notFound(`${history.missing}: ${id}`, history.param));
      },
    );
  }
}
