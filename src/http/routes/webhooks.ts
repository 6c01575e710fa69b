import type { FastifyInstance } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import type { WebhookRegistry } from '../../application/webhook-registry.js';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../../domain/webhook.js';
import type { WebhooksQueries } from '../../../projections/webhooks-projection.js';
import { fromRejection } from '../api-error.js';
import { httpSchema } from '../../platform/schemas.js';
import { requestMetadata } from '../request-metadata.js';

export interface WebhookRouteDeps {
  readonly webhooks: WebhookRegistry;
  readonly webhooksQueries: WebhooksQueries;
}

/** Operators register endpoints that hear of batches' terminal transitions (bearer API_KEY, under /mgmt/v1). */
export function registerWebhookRoutes(app: FastifyInstance, deps: WebhookRouteDeps): void {
  const security = [{ bearer: [] }];
  app.post(
    '/mgmt/v1/webhooks',
    {
      schema: {
        summary: 'Register a webhook endpoint (201; the answer holds its signing secret, shown this once)',
        tags: ['webhooks'],
        security,
        body: httpSchema('CreateWebhookRequest'),
        response: { 201: httpSchema('CreatedWebhook') },
      },
    },
    async (request, reply) => {
      const body = request.body as { url: string; events?: WebhookEventType[] };
      const registered = await deps.webhooks.register(body.url, body.events ?? WEBHOOK_EVENT_TYPES, requestMetadata(request));
      if (E.isLeft(registered)) throw fromRejection(registered.left);
      const { webhook_id, url, events, secret, created_at } = registered.right;
      return reply.status(201).send({ object: 'webhook', id: webhook_id, url, events, created_at, secret });
    },
  );

  app.get(
    '/mgmt/v1/webhooks',
    { schema: { summary: 'List registered webhook endpoints (without their secrets)', tags: ['webhooks'], security, response: { 200: httpSchema('WebhookList') } } },
    async () => ({
      object: 'list' as const,
      data: deps.webhooksQueries.list().map((row) => ({ object: 'webhook' as const, id: row.webhook_id, url: row.url, events: row.events, created_at: row.created_at })),
    }),
  );

  app.delete(
    '/mgmt/v1/webhooks/:webhook_id',
    {
      schema: {
        summary: 'Remove a webhook endpoint: nothing more is delivered to it, pending retries included',
        tags: ['webhooks'],
        security,
        params: httpSchema('WebhookIdParams'),
        response: { 200: httpSchema('DeletedWebhook') },
      },
    },
    async (request) => {
      const { webhook_id } = request.params as { webhook_id: string };
      const removed = await deps.webhooks.remove(webhook_id, requestMetadata(request));
      if (E.isLeft(removed)) throw fromRejection(removed.left);
      return { object: 'webhook' as const, id: webhook_id, deleted: true as const };
    },
  );
}
