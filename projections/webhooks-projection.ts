import type Database from 'better-sqlite3';
import type { DeliveryEvent, WebhookEvent, WebhookEventType } from '../src/domain/webhook.js';
import { webhookEventId, webhookEventTypeOf } from '../src/domain/webhook.js';
import { parseStreamName } from '../src/domain/stream-names.js';
import type { Projection } from './projection.js';
import { resetAutoincrement, statement } from './read-model-store.js';

/**
 * Registered webhooks, and the deliveries they are owed. A batch's terminal event owes one
 * delivery to every webhook registered before it (in log order) that listens for its type; the
 * delivery events settle it. The pending rows are the deliverer's outbox: they survive restarts
 * because they are rebuilt from the log.
 */
export const webhooksProjection: Projection = {
  name: 'webhooks',
  version: 2,
  create(db) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS webhooks (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        webhook_id  TEXT    NOT NULL UNIQUE,
        url         TEXT    NOT NULL,
        events      TEXT    NOT NULL,
        secret      TEXT    NOT NULL,
        created_at  INTEGER NOT NULL,
        removed     INTEGER NOT NULL DEFAULT 0,
        account_id  TEXT
      );
      CREATE TABLE IF NOT EXISTS webhook_deliveries (
        webhook_id      TEXT    NOT NULL,
        event_id        TEXT    NOT NULL,
        batch_id        TEXT    NOT NULL,
        type            TEXT    NOT NULL,
        created_at      INTEGER NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        state           TEXT    NOT NULL DEFAULT 'pending',
        PRIMARY KEY (webhook_id, event_id)
      );
      CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
    `);
  },
  drop(db) {
    db.exec('DROP TABLE IF EXISTS webhooks; DROP TABLE IF EXISTS webhook_deliveries;');
    resetAutoincrement(db, 'webhooks');
  },
  apply(db, recorded) {
    const stream = parseStreamName(recorded.streamName);
    if (stream?.kind === 'batch') {
      const type = webhookEventTypeOf(recorded.type);
      if (!type) return;
      const batchId = stream.id;
      const createdAtMs = recorded.recordedAt;
      // The operator's webhooks hear of every batch; an account's, of that account's batches only
      // (the batches read model, applied before this one, holds the batch's account).
      const account = (statement(db, 'SELECT account_id FROM batches WHERE id = ?').get(batchId) as { account_id: string | null } | undefined)?.account_id ?? null;
      for (const row of statement(db, 'SELECT webhook_id, events FROM webhooks WHERE removed = 0 AND (account_id IS NULL OR account_id = ?) ORDER BY seq').all(account) as { webhook_id: string; events: string }[]) {
        if (!(JSON.parse(row.events) as WebhookEventType[]).includes(type)) continue;
        statement(
          db,
          `INSERT INTO webhook_deliveries (webhook_id, event_id, batch_id, type, created_at, next_attempt_at)
           VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
        ).run(row.webhook_id, webhookEventId(batchId, type), batchId, type, Math.floor(createdAtMs / 1000), createdAtMs);
      }
      return;
    }
    if (stream?.kind === 'webhook') {
      const event = recorded as unknown as WebhookEvent;
      if (event.type === 'WebhookRegistered') {
        const { webhook_id, url, events, secret, created_at, account_id } = event.data;
        statement(db, 'INSERT INTO webhooks (webhook_id, url, events, secret, created_at, account_id) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (webhook_id) DO NOTHING').run(webhook_id, url, JSON.stringify(events), secret, created_at, account_id ?? null);
      } else if (event.type === 'WebhookRemoved') {
        statement(db, 'UPDATE webhooks SET removed = 1 WHERE webhook_id = ?').run(event.data.webhook_id);
        statement(db, "UPDATE webhook_deliveries SET state = 'removed' WHERE webhook_id = ? AND state = 'pending'").run(event.data.webhook_id);
      }
      return;
    }
    if (stream?.kind === 'webhookdelivery') {
      const event = recorded as unknown as DeliveryEvent;
      const { webhook_id, event_id } = event.data;
      if (event.type === 'WebhookDeliveryAttempted') {
        statement(db, 'UPDATE webhook_deliveries SET attempts = ?, next_attempt_at = COALESCE(?, next_attempt_at) WHERE webhook_id = ? AND event_id = ?').run(
          event.data.attempt,
          event.data.next_attempt_at,
          webhook_id,
          event_id,
        );
      } else {
        statement(db, 'UPDATE webhook_deliveries SET state = ? WHERE webhook_id = ? AND event_id = ?').run(event.type === 'WebhookDelivered' ? 'delivered' : 'abandoned', webhook_id, event_id);
      }
    }
  },
};

export interface WebhookRow {
  readonly webhook_id: string;
  readonly url: string;
  readonly events: WebhookEventType[];
  readonly created_at: number;
  /** The account that registered it; null: the operator's. */
  readonly account_id: string | null;
}

export interface DueDelivery {
  readonly webhook_id: string;
  readonly event_id: string;
  readonly batch_id: string;
  readonly type: WebhookEventType;
  /** The transition's time, seconds. */
  readonly created_at: number;
  readonly attempts: number;
  readonly url: string;
  readonly secret: string;
  /** The account that registered the webhook; null: the operator's. */
  readonly account_id: string | null;
}

export class WebhooksQueries {
  constructor(private readonly db: Database.Database) {}

  /** Registered webhooks, oldest first, without their secrets; `owner`: only that account's. */
  list(owner?: string): WebhookRow[] {
    const rows = statement(this.db, `SELECT webhook_id, url, events, created_at, account_id FROM webhooks WHERE removed = 0${owner === undefined ? '' : ' AND account_id = @owner'} ORDER BY seq`).all({ owner }) as (Omit<WebhookRow, 'events'> & { events: string })[];
    return rows.map((row) => ({ ...row, events: JSON.parse(row.events) as WebhookEventType[] }));
  }

  /** The account that registered a webhook not removed (null: the operator); undefined when there is none. */
  ownerOf(webhookId: string): string | null | undefined {
    return (statement(this.db, 'SELECT account_id FROM webhooks WHERE webhook_id = ? AND removed = 0').get(webhookId) as { account_id: string | null } | undefined)?.account_id;
  }

  /** Pending deliveries whose next attempt is due at `nowMs`, oldest first. */
  due(nowMs: number, limit: number): DueDelivery[] {
    return statement(
      this.db,
      `SELECT d.webhook_id, d.event_id, d.batch_id, d.type, d.created_at, d.attempts, w.url, w.secret, w.account_id
       FROM webhook_deliveries d JOIN webhooks w ON w.webhook_id = d.webhook_id
       WHERE d.state = 'pending' AND d.next_attempt_at <= ? AND w.removed = 0 ORDER BY d.next_attempt_at LIMIT ?`,
    ).all(nowMs, limit) as DueDelivery[];
  }
}
