import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import type { DueDelivery, WebhooksQueries } from '../../projections/webhooks-projection.js';
import type { WebhookRegistry } from '../../src/application/webhook-registry.js';
import { nextAttemptAt } from '../../src/domain/webhook.js';
import { RepeatingTask } from './repeating-task.js';
import { signedHeaders } from './webhook-signature.js';
import { guardedPost } from './guarded-post.js';
import type { OutboundTargets } from '../../src/platform/outbound-targets.js';

export interface WebhookDelivererOptions {
  /** The first retry's delay; each next one doubles (at most an hour), for up to 72 hours. */
  readonly retryBaseMs: number;
  /** How often the outbox is looked at. */
  readonly intervalMs: number;
  /** How long a receiver has to answer. */
  readonly timeoutMs: number;
}

/** Deliveries sent at once per look at the outbox. */
const BATCH = 16;

/**
 * Sends what the webhooks read model says is owed and due, signed, and records each attempt in the
 * log. The read model is the outbox, rebuilt from the log, so a restart resumes every pending
 * delivery on its schedule. At least once: a crash between the answer and the record sends again,
 * with the same webhook-id.
 */
export class WebhookDeliverer {
  private readonly task: RepeatingTask;

  constructor(
    private readonly deps: {
      queries: WebhooksQueries;
      webhooks: WebhookRegistry;
      now: () => number;
      log: Pick<Logger, 'warn' | 'info'>;
      /** What an account's webhook may reach (the operator's webhooks go wherever the operator said). */
      targets: OutboundTargets;
    },
    private readonly options: WebhookDelivererOptions,
  ) {
    this.task = new RepeatingTask(() => this.deliverDue(), options.intervalMs, (error) => deps.log.warn({ err: error }, 'webhook delivery round failed'));
  }

  start(): void {
    this.task.start();
  }

  stop(): Promise<void> {
    return this.task.stop();
  }

  async deliverDue(): Promise<void> {
    const due = this.deps.queries.due(this.deps.now(), BATCH);
    await Promise.all(due.map((delivery) => this.deliver(delivery)));
  }

  private async deliver(delivery: DueDelivery): Promise<void> {
    const body = JSON.stringify({ object: 'event', id: delivery.event_id, type: delivery.type, created_at: delivery.created_at, data: { id: delivery.batch_id } });
    const sentAt = this.deps.now();
    let statusCode: number | null = null;
    let error: string | null = null;
    const headers = signedHeaders(delivery.secret, delivery.event_id, Math.floor(sentAt / 1000), body);
    try {
      if (delivery.account_id !== null) {
        // An account's webhook: the address connected to is checked at every delivery.
        statusCode = await guardedPost(delivery.url, headers, body, this.options.timeoutMs, this.deps.targets);
      } else {
        // Redirects are not followed: deliveries go only to the registered URL.
        const response = await fetch(delivery.url, { method: 'POST', headers, body, redirect: 'manual', signal: AbortSignal.timeout(this.options.timeoutMs) });
        statusCode = response.status;
        await response.body?.cancel().catch(() => undefined);
      }
    } catch (failure) {
      const cause = (failure as { cause?: { code?: string } }).cause?.code;
      error = `${(failure as Error).name}: ${(failure as Error).message}${cause ? ` (${cause})` : ''}`.slice(0, 1024);
    }
    const at = this.deps.now();
    const attempt = delivery.attempts + 1;
    const recorded = await this.deps.webhooks.recordAttempt(
      {
        type: 'RecordDeliveryAttempt',
        subject: { webhook_id: delivery.webhook_id, event_id: delivery.event_id, batch_id: delivery.batch_id, type: delivery.type },
        attempt,
        statusCode,
        error,
        at,
        nextAttemptAt: nextAttemptAt(delivery.created_at * 1000, attempt, at, this.options.retryBaseMs),
      },
      { correlationId: 'webhook-deliverer' },
    );
    if (E.isLeft(recorded)) this.deps.log.info({ reason: recorded.left.message }, 'webhook attempt already recorded elsewhere');
  }
}
