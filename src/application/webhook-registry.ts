import { randomBytes } from 'node:crypto';
import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import type { Clock } from '../platform/clock.js';
import { newWebhookId } from '../platform/ids.js';
import type { Rejection } from '../domain/rejection.js';
import { webhookDeliveryStreamName, webhookStreamName } from '../domain/stream-names.js';
import { type DeliveryCommand, type WebhookEventType, type WebhookRegistration, deliveryDecider, webhookDecider } from '../domain/webhook.js';
import type { EventStore } from '../event-store/event-store.js';
import { type CommandMetadata, type ReadModelsPosition, execute } from './command-handler.js';

/** Webhook endpoints, and the record of what was delivered to them. */
export class WebhookRegistry {
  constructor(private readonly deps: { eventStore: EventStore; projector: ReadModelsPosition; clock: Clock; log: Pick<Logger, 'warn'> }) {}

  /** Registers an endpoint with a new id and secret; the answer is the only place the secret is shown. */
  async register(url: string, events: readonly WebhookEventType[], metadata: CommandMetadata, accountId?: string): Promise<E.Either<Rejection, WebhookRegistration & { created_at: number }>> {
    const webhook: WebhookRegistration = { webhook_id: newWebhookId(), url, events, secret: `whsec_${randomBytes(32).toString('base64')}`, ...(accountId !== undefined ? { account_id: accountId } : {}) };
    const outcome = await execute(this.deps, webhookStreamName(webhook.webhook_id), webhookDecider, { type: 'RegisterWebhook', webhook, at: this.deps.clock.nowSeconds() }, { metadata });
    if (E.isLeft(outcome)) return outcome;
    const state = outcome.right.state;
    if (state.status !== 'registered') throw new Error(`webhook ${webhook.webhook_id} is not registered after registering it`);
    return E.right({ ...state.webhook, created_at: state.createdAt });
  }

  async remove(webhookId: string, metadata: CommandMetadata): Promise<E.Either<Rejection, void>> {
    const outcome = await execute(this.deps, webhookStreamName(webhookId), webhookDecider, { type: 'RemoveWebhook', webhookId, at: this.deps.clock.nowSeconds() }, { metadata });
    return E.isLeft(outcome) ? outcome : E.right(undefined);
  }

  /** Records one delivery attempt; a conflict means another process recorded it first. */
  async recordAttempt(command: DeliveryCommand, metadata: CommandMetadata): Promise<E.Either<Rejection, void>> {
    const { webhook_id, event_id } = command.subject;
    const outcome = await execute(this.deps, webhookDeliveryStreamName(webhook_id, event_id), deliveryDecider, command, { metadata });
    return E.isLeft(outcome) ? outcome : E.right(undefined);
  }
}
