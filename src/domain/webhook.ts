// Webhooks: endpoints registered to hear of batches' terminal transitions, and the delivery of
// each transition to each endpoint. Pure decide/evolve; the deliverer does the HTTP.
import * as E from 'fp-ts/lib/Either.js';
import type { Decider } from './decider.js';
import { derivedId } from './derived-ids.js';
import { ID_PREFIX } from './id-prefixes.js';
import { type Rejection, reject } from './rejection.js';

/** The batch events a webhook may hear of, by their public type. */
export const WEBHOOK_EVENT_TYPES = ['batch.completed', 'batch.failed', 'batch.expired', 'batch.cancelled'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

const TERMINAL_EVENTS: Readonly<Record<string, WebhookEventType>> = {
  BatchCompleted: 'batch.completed',
  BatchFailed: 'batch.failed',
  BatchExpired: 'batch.expired',
  BatchCancelled: 'batch.cancelled',
};

/** The public type of a batch's terminal event; undefined for any other event. */
export const webhookEventTypeOf = (eventType: string): WebhookEventType | undefined => TERMINAL_EVENTS[eventType];

/** One id per batch transition, whichever process notices it and however often it is sent. */
export const webhookEventId = (batchId: string, type: WebhookEventType): string => derivedId(ID_PREFIX.webhookEvent, `${batchId}:${type}`);

/** Deliveries stop being retried this long after the transition. */
export const DELIVERY_WINDOW_SECONDS = 72 * 3600;
/** The longest wait between two attempts. */
const MAX_RETRY_DELAY_MS = 3600 * 1000;
export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * When to try again after failed attempt `attempt` (1-based) made at `atMs`: base × 2^(attempt-1),
 * at most an hour; null once that falls past the delivery window of the transition at `sinceMs`.
 */
export function nextAttemptAt(sinceMs: number, attempt: number, atMs: number, baseMs: number): number | null {
  const delay = Math.min(baseMs * 2 ** Math.min(attempt - 1, 40), MAX_RETRY_DELAY_MS);
  const next = atMs + delay;
  return next > sinceMs + DELIVERY_WINDOW_SECONDS * 1000 ? null : next;
}

/** The URL's own problem, or undefined when it is an absolute http(s) URL. */
export function webhookUrlProblem(url: string): string | undefined {
  if (url.length > MAX_WEBHOOK_URL_LENGTH) return `url is longer than ${MAX_WEBHOOK_URL_LENGTH} characters`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'url must be an absolute http:// or https:// URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return `url must use http or https, not ${parsed.protocol.replace(/:$/, '')}`;
  if (parsed.username || parsed.password) return 'url must not carry credentials';
  return undefined;
}

// --- The webhook endpoint ---------------------------------------------------------------------

export interface WebhookRegistration {
  readonly webhook_id: string;
  readonly url: string;
  readonly events: readonly WebhookEventType[];
  /** `whsec_` and base64: the key the deliveries are signed with. */
  readonly secret: string;
  /** The account that registered it (ACCOUNTS=required): it hears of that account's batches only. Absent: the operator's, for every batch. */
  readonly account_id?: string;
}

export type WebhookState =
  | { readonly status: 'absent' }
  | { readonly status: 'registered' | 'removed'; readonly webhook: WebhookRegistration; readonly createdAt: number };

export type WebhookCommand =
  | { readonly type: 'RegisterWebhook'; readonly webhook: WebhookRegistration; readonly at: number }
  | { readonly type: 'RemoveWebhook'; readonly webhookId: string; readonly at: number };

export type WebhookEvent =
  | { readonly type: 'WebhookRegistered'; readonly data: WebhookRegistration & { readonly created_at: number } }
  | { readonly type: 'WebhookRemoved'; readonly data: { readonly webhook_id: string; readonly removed_at: number } };

export function decideWebhook(command: WebhookCommand, state: WebhookState): E.Either<Rejection, WebhookEvent[]> {
  if (command.type === 'RegisterWebhook') {
    const { webhook } = command;
    if (state.status !== 'absent') return reject('conflict', `Webhook ${webhook.webhook_id} already exists`, 'id');
    const problem = webhookUrlProblem(webhook.url);
    if (problem) return reject('invalid', problem, 'url');
    if (webhook.events.length === 0) return reject('invalid', `events must name at least one of ${WEBHOOK_EVENT_TYPES.join(', ')}`, 'events');
    const unknown = webhook.events.find((type) => !WEBHOOK_EVENT_TYPES.includes(type));
    if (unknown) return reject('invalid', `Unknown event type ${JSON.stringify(unknown)}: expected one of ${WEBHOOK_EVENT_TYPES.join(', ')}`, 'events');
    return E.right([{ type: 'WebhookRegistered', data: { ...webhook, events: [...new Set(webhook.events)], created_at: command.at } }]);
  }
  if (state.status !== 'registered') return reject('not_found', `No such webhook: ${command.webhookId}`, 'webhook_id');
  return E.right([{ type: 'WebhookRemoved', data: { webhook_id: command.webhookId, removed_at: command.at } }]);
}

export function evolveWebhook(state: WebhookState, event: WebhookEvent): WebhookState {
  if (event.type === 'WebhookRegistered') {
    const { created_at, ...webhook } = event.data;
    return { status: 'registered', webhook, createdAt: created_at };
  }
  return state.status === 'absent' ? state : { ...state, status: 'removed' };
}

export const webhookDecider: Decider<WebhookCommand, WebhookState, WebhookEvent> = {
  decide: decideWebhook,
  evolve: evolveWebhook,
  initialState: { status: 'absent' },
};

// --- One transition's delivery to one endpoint --------------------------------------------------

export interface DeliverySubject {
  readonly webhook_id: string;
  readonly event_id: string;
  readonly batch_id: string;
  readonly type: WebhookEventType;
}

export type DeliveryState = { readonly attempts: number; readonly finished: boolean };

export type DeliveryCommand = {
  readonly type: 'RecordDeliveryAttempt';
  readonly subject: DeliverySubject;
  readonly attempt: number;
  /** The receiver's status code; null when it gave none (refused, timed out). */
  readonly statusCode: number | null;
  readonly error: string | null;
  /** Milliseconds since the epoch. */
  readonly at: number;
  /** When the next attempt is due after a failure; null when the delivery window is spent. */
  readonly nextAttemptAt: number | null;
};

export type DeliveryEvent =
  | {
      readonly type: 'WebhookDeliveryAttempted';
      readonly data: DeliverySubject & { readonly attempt: number; readonly status_code: number | null; readonly error: string | null; readonly at: number; readonly next_attempt_at: number | null };
    }
  | { readonly type: 'WebhookDelivered'; readonly data: DeliverySubject & { readonly delivered_at: number } }
  | { readonly type: 'WebhookAbandoned'; readonly data: DeliverySubject & { readonly abandoned_at: number; readonly attempts: number } };

export const answeredSuccessfully = (statusCode: number | null): boolean => statusCode !== null && statusCode >= 200 && statusCode < 300;

export function decideDelivery(command: DeliveryCommand, state: DeliveryState): E.Either<Rejection, DeliveryEvent[]> {
  if (state.finished) return reject('conflict', `Delivery of ${command.subject.event_id} to ${command.subject.webhook_id} is already over`, 'event_id');
  // Another process recorded this attempt first: its record stands.
  if (command.attempt !== state.attempts + 1) return reject('conflict', `Attempt ${command.attempt} of ${command.subject.event_id} is not the next (${state.attempts + 1})`, 'attempt');
  const delivered = answeredSuccessfully(command.statusCode);
  const attempted: DeliveryEvent = {
    type: 'WebhookDeliveryAttempted',
    data: { ...command.subject, attempt: command.attempt, status_code: command.statusCode, error: command.error, at: command.at, next_attempt_at: delivered ? null : command.nextAttemptAt },
  };
  if (delivered) return E.right([attempted, { type: 'WebhookDelivered', data: { ...command.subject, delivered_at: command.at } }]);
  if (command.nextAttemptAt === null) return E.right([attempted, { type: 'WebhookAbandoned', data: { ...command.subject, abandoned_at: command.at, attempts: command.attempt } }]);
  return E.right([attempted]);
}

export function evolveDelivery(state: DeliveryState, event: DeliveryEvent): DeliveryState {
  if (event.type === 'WebhookDeliveryAttempted') return { ...state, attempts: event.data.attempt };
  return { ...state, finished: true };
}

export const deliveryDecider: Decider<DeliveryCommand, DeliveryState, DeliveryEvent> = {
  decide: decideDelivery,
  evolve: evolveDelivery,
  initialState: { attempts: 0, finished: false },
};
