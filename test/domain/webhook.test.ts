import { describe, expect, it } from 'vitest';
import {
  DELIVERY_WINDOW_SECONDS,
  type DeliveryCommand,
  type DeliveryEvent,
  type WebhookEvent,
  type WebhookRegistration,
  deliveryDecider,
  nextAttemptAt,
  webhookDecider,
  webhookEventId,
  webhookEventTypeOf,
} from '../../src/domain/webhook.js';
import { deciderSpec } from '../support/decider-spec.js';

const hooks = deciderSpec(webhookDecider);
const deliveries = deciderSpec(deliveryDecider);
const webhook: WebhookRegistration = { webhook_id: 'wh_1', url: 'https://example.test/hook', events: ['batch.completed'], secret: 'whsec_a2V5' };
const registered: WebhookEvent = { type: 'WebhookRegistered', data: { ...webhook, created_at: 10 } };
const subject = { webhook_id: 'wh_1', event_id: 'evt_1', batch_id: 'batch_1', type: 'batch.completed' as const };
const attempt = (n: number, statusCode: number | null, next: number | null): DeliveryCommand => ({
  type: 'RecordDeliveryAttempt', subject, attempt: n, statusCode, error: statusCode === null ? 'refused' : null, at: 1000 * n, nextAttemptAt: next,
});
const attempted = (n: number, statusCode: number | null, next: number | null): DeliveryEvent => ({
  type: 'WebhookDeliveryAttempted', data: { ...subject, attempt: n, status_code: statusCode, error: statusCode === null ? 'refused' : null, at: 1000 * n, next_attempt_at: next },
});

describe('Webhook aggregate', () => {
  it('registers an http(s) endpoint, and refuses other schemes, credentials and unknown event types', () => {
    hooks.given([]).when({ type: 'RegisterWebhook', webhook, at: 10 }).then([registered]);
    for (const url of ['ftp://example.test/x', 'file:///etc/passwd', 'not a url', 'https://user:pw@example.test/']) {
      hooks.given([]).when({ type: 'RegisterWebhook', webhook: { ...webhook, url }, at: 10 }).thenRejects({ kind: 'invalid', param: 'url' });
    }
    hooks.given([]).when({ type: 'RegisterWebhook', webhook: { ...webhook, events: ['batch.started' as never] }, at: 10 }).thenRejects({ kind: 'invalid', param: 'events' });
  });

  it('removes a registered webhook once; a second removal finds none', () => {
    const removed: WebhookEvent = { type: 'WebhookRemoved', data: { webhook_id: 'wh_1', removed_at: 20 } };
    hooks.given([registered]).when({ type: 'RemoveWebhook', webhookId: 'wh_1', at: 20 }).then([removed]);
    hooks.given([registered, removed]).when({ type: 'RemoveWebhook', webhookId: 'wh_1', at: 30 }).thenRejects({ kind: 'not_found' });
    hooks.given([]).when({ type: 'RemoveWebhook', webhookId: 'wh_1', at: 30 }).thenRejects({ kind: 'not_found' });
  });
});

describe('A delivery', () => {
  it('records a failed attempt with its next time, then the success that ends it', () => {
    deliveries.given([]).when(attempt(1, 500, 5000)).then([attempted(1, 500, 5000)]);
    deliveries.given([attempted(1, 500, 5000)]).when(attempt(2, 204, null)).then([attempted(2, 204, null), { type: 'WebhookDelivered', data: { ...subject, delivered_at: 2000 } }]);
  });

  it('is abandoned when no next attempt fits the window', () => {
    deliveries.given([]).when(attempt(1, null, null)).then([attempted(1, null, null), { type: 'WebhookAbandoned', data: { ...subject, abandoned_at: 1000, attempts: 1 } }]);
  });

  it('refuses an attempt another process already recorded, and any after the end', () => {
    deliveries.given([attempted(1, 500, 5000)]).when(attempt(1, 500, 5000)).thenRejects({ kind: 'conflict', param: 'attempt' });
    deliveries.given([attempted(1, 200, null), { type: 'WebhookDelivered', data: { ...subject, delivered_at: 1000 } }]).when(attempt(2, 200, null)).thenRejects({ kind: 'conflict' });
  });
});

describe('Delivery rules', () => {
  it('doubles the wait from the base, at most an hour, and stops past 72 hours', () => {
    expect(nextAttemptAt(0, 1, 0, 1000)).toBe(1000);
    expect(nextAttemptAt(0, 2, 0, 1000)).toBe(2000);
    expect(nextAttemptAt(0, 5, 0, 1000)).toBe(16_000);
    expect(nextAttemptAt(0, 30, 0, 1000)).toBe(3_600_000);
    expect(nextAttemptAt(0, 80, DELIVERY_WINDOW_SECONDS * 1000 - 10, 1000)).toBeNull();
  });

  it('names one stable event id per batch transition, and only terminal events', () => {
    expect(webhookEventId('batch_1', 'batch.completed')).toBe(webhookEventId('batch_1', 'batch.completed'));
    expect(webhookEventId('batch_1', 'batch.completed')).not.toBe(webhookEventId('batch_1', 'batch.failed'));
    expect(webhookEventId('batch_1', 'batch.completed')).toMatch(/^evt_[0-9a-f]{24}$/);
    expect(['BatchCompleted', 'BatchFailed', 'BatchExpired', 'BatchCancelled', 'BatchCreated'].map(webhookEventTypeOf)).toEqual(['batch.completed', 'batch.failed', 'batch.expired', 'batch.cancelled', undefined]);
  });
});
