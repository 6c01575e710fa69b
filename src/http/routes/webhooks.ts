import type { FastifyInstance } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import type { WebhookRegistry } from '../../application/webhook-registry.js';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../../domain/webhook.js';
import type { WebhooksQueries } from '../../../projections/webhooks-projection.js';
import { ApiError, fromRejection, notFound } from '../api-error.js';
import { type OutboundTargets, resolvedTargetRefusal } from '../../platform/outbound-targets.js';
import { httpSchema } from '../../platform/schemas.js';
import type { Principal } from '../../domain/principal.js';
import { requestMetadata } from '../request-metadata.js';

export interface WebhookRouteDeps {
  readonly webhooks: WebhookRegistry;
  readonly webhooksQueries: WebhooksQueries;
  /** What an account's webhook may reach (WEBHOOK_ALLOWED_TARGETS). */
  readonly webhookTargets: OutboundTargets;
}

const webhookObject = (row: { webhook_id: string; url: string; events: readonly WebhookEventType[]; created_at: number; account_id?: string | null }) => ({
  object: 'webhook' as const,
  id: row.webhook_id,
  url: row.url,
  events: row.events,
  created_at: row.created_at,
  ...(row.account_id ? { account_id: row.account_id } : {}),
});

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
      return reply.status(201).send({ ...webhookObject(registered.right), secret: registered.right.secret });
    },
  );

  app.get(
    '/mgmt/v1/webhooks',
    { schema: { summary: 'List registered webhook endpoints (without their secrets)', tags: ['webhooks'], security, response: { 200: httpSchema('WebhookList') } } },
    async () => ({
      object: 'list' as const,
      data: deps.webhooksQueries.list().map(webhookObject),
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

  // An account's own webhooks (ACCOUNTS=required): they hear of its batches only, and may reach no
  // address inward of the service (checked here by resolving the host, and again at every delivery).
  const accountOf = (principal: Principal): string => {
    if (principal.kind !== 'account') throw notFound('Webhooks under /v1 belong to accounts (ACCOUNTS=required); operators register theirs at /mgmt/v1/webhooks');
    return principal.accountId;
  };
  app.post(
    '/v1/webhooks',
    { schema: { summary: "Register a webhook for the calling account's batches (201; its signing secret shown this once)", tags: ['webhooks'], body: httpSchema('CreateWebhookRequest'), response: { 201: httpSchema('CreatedWebhook') } } },
    async (request, reply) => {
      const accountId = accountOf(request.principal);
      const body = request.body as { url: string; events?: WebhookEventType[] };
      const refused = await resolvedTargetRefusal(body.url, deps.webhookTargets);
      if (refused) throw new ApiError(400, `Webhook url refused: ${refused}`, 'invalid_request_error', 'webhook_target_refused', 'url');
      const registered = await deps.webhooks.register(body.url, body.events ?? WEBHOOK_EVENT_TYPES, requestMetadata(request), accountId);
      if (E.isLeft(registered)) throw fromRejection(registered.left);
      return reply.status(201).send({ ...webhookObject(registered.right), secret: registered.right.secret });
    },
  );
  app.get(
    '/v1/webhooks',
    { schema: { summary: "The calling account's webhooks (without their secrets)", tags: ['webhooks'], response: { 200: httpSchema('WebhookList') } } },
    async (request) => {
      return { object: 'list' as const, data: deps.webhooksQueries.list(accountOf(request.principal)).map(webhookObject) };
    },
  );
  app.delete(
    '/v1/webhooks/:webhook_id',
    { schema: { summary: "Remove one of the calling account's webhooks", tags: ['webhooks'], params: httpSchema('WebhookIdParams'), response: { 200: httpSchema('DeletedWebhook') } } },
    async (request) => {
      const accountId = accountOf(request.principal);
      const { webhook_id } = request.params as { webhook_id: string };
      // Another account's webhook, or the operator's, is answered as one never registered.
      if (deps.webhooksQueries.ownerOf(webhook_id) !== accountId) throw notFound(`No such webhook: ${webhook_id}`, 'webhook_id');
      const removed = await deps.webhooks.remove(webhook_id, requestMetadata(request));
      if (E.isLeft(removed)) throw fromRejection(removed.left);
      return { object: 'webhook' as const, id: webhook_id, deleted: true as const };
    },
  );
}
