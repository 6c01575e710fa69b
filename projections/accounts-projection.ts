import type Database from 'better-sqlite3';
import type { AccountEvent, AccountLimits } from '../src/domain/account.js';
import type { AccountUsage } from '../src/domain/account-quota.js';
import { STOPPABLE_STATUSES } from '../src/domain/batch.js';
import type { RecordedEvent } from '../src/event-store/event-store.js';
import type { Projection } from './projection.js';
import { resetAutoincrement, statement } from './read-model-store.js';

/** The statuses in which a batch's lines count as queued: it has not ended. */
const QUEUED_STATUSES = new Set<string>([...STOPPABLE_STATUSES, 'finalizing', 'cancelling']);

/** Accounts and their keys (digests only): what the API authenticates `/v1` requests against. */
export const accountsProjection: Projection = {
  name: 'accounts',
  version: 1,
  create(db) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS accounts (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        account_id    TEXT    NOT NULL UNIQUE,
        created_at    INTEGER NOT NULL,
        queued_lines  INTEGER,
        queued_tokens INTEGER,
        stored_bytes  INTEGER
      );
      CREATE TABLE IF NOT EXISTS account_keys (
        key_id     TEXT    PRIMARY KEY,
        account_id TEXT    NOT NULL,
        key_sha256 TEXT    NOT NULL UNIQUE,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      );
      CREATE INDEX IF NOT EXISTS account_keys_by_account ON account_keys (account_id, created_at);
    `);
  },
  drop(db) {
    db.exec('DROP TABLE IF EXISTS accounts; DROP TABLE IF EXISTS account_keys;');
    resetAutoincrement(db, 'accounts');
  },
  apply(db, recorded) {
    const event = recorded as unknown as RecordedEvent & AccountEvent;
    switch (event.type) {
      case 'AccountOpened':
        statement(db, 'INSERT INTO accounts (account_id, created_at) VALUES (@account_id, @created_at) ON CONFLICT DO NOTHING').run(event.data);
        return;
      case 'AccountKeyAdded':
        statement(db, 'INSERT INTO account_keys (key_id, account_id, key_sha256, created_at) VALUES (@key_id, @account_id, @key_sha256, @created_at) ON CONFLICT DO NOTHING').run(event.data);
        return;
      case 'AccountKeyRevoked':
        statement(db, 'UPDATE account_keys SET revoked_at = @revoked_at WHERE key_id = @key_id AND account_id = @account_id').run(event.data);
        return;
      case 'AccountLimitsSet':
        statement(db, 'UPDATE accounts SET queued_lines = @queued_lines, queued_tokens = @queued_tokens, stored_bytes = @stored_bytes WHERE account_id = @account_id').run(event.data);
        return;
    }
  },
};

export interface AccountListing {
  readonly account_id: string;
  readonly created_at: number;
  readonly limits: AccountLimits;
  readonly keys: ReadonlyArray<{ readonly key_id: string; readonly created_at: number; readonly revoked_at: number | null }>;
}

/** Queries on the accounts read model. Never returns a key's digest to a caller outside authentication. */
export class AccountsQueries {
  constructor(private readonly db: Database.Database) {}

  /** A key that is not revoked, by its id: its account and digest (for authentication alone). */
  activeKey(keyId: string): { account_id: string; key_sha256: string } | undefined {
    return statement(this.db, 'SELECT account_id, key_sha256 FROM account_keys WHERE key_id = ? AND revoked_at IS NULL').get(keyId) as { account_id: string; key_sha256: string } | undefined;
  }

  /** Every account with its keys' ids, oldest first. */
  list(): AccountListing[] {
    const accounts = statement(this.db, 'SELECT account_id, created_at, queued_lines, queued_tokens, stored_bytes FROM accounts ORDER BY seq').all() as Array<{ account_id: string; created_at: number } & AccountLimits>;
    const keys = statement(this.db, 'SELECT key_id, account_id, created_at, revoked_at FROM account_keys ORDER BY created_at, key_id').all() as Array<{ key_id: string; account_id: string; created_at: number; revoked_at: number | null }>;
    return accounts.map(({ account_id, created_at, queued_lines, queued_tokens, stored_bytes }) => ({
      account_id,
      created_at,
      limits: { queued_lines, queued_tokens, stored_bytes },
      keys: keys.filter((key) => key.account_id === account_id).map(({ key_id, created_at, revoked_at }) => ({ key_id, created_at, revoked_at })),
    }));
  }

  /** The account's limits; undefined for an account never opened. */
  limitsOf(accountId: string): AccountLimits | undefined {
    return statement(this.db, 'SELECT queued_lines, queued_tokens, stored_bytes FROM accounts WHERE account_id = ?').get(accountId) as AccountLimits | undefined;
  }

  /** What the account holds now, from the batches and files read models. */
  usageOf(accountId: string): AccountUsage {
    return { ...this.queuedWorkOf(accountId), stored_bytes: this.storedBytesOf(accountId) };
  }

  /** The lines and estimated tokens of the account's batches not yet ended, but `excludingBatch`. */
  queuedWorkOf(accountId: string, excludingBatch = ''): Pick<AccountUsage, 'queued_lines' | 'queued_tokens'> {
    return statement(
      this.db,
      `SELECT COALESCE(SUM(total), 0) AS queued_lines, COALESCE(SUM(estimated_tokens), 0) AS queued_tokens FROM batches
        WHERE account_id = @account AND id <> @excluding AND status IN (${[...QUEUED_STATUSES].map((status) => `'${status}'`).join(', ')})`,
    ).get({ account: accountId, excluding: excludingBatch }) as { queued_lines: number; queued_tokens: number };
  }

  /** The bytes of the account's files not deleted or expired. */
  storedBytesOf(accountId: string): number {
    return (statement(this.db, "SELECT COALESCE(SUM(bytes), 0) AS stored_bytes FROM files WHERE account_id = ? AND status = 'active'").get(accountId) as { stored_bytes: number }).stored_bytes;
  }

  /** Every account's usage, for the metrics. */
  allUsage(): Array<{ account_id: string } & AccountUsage> {
    return (statement(this.db, 'SELECT account_id FROM accounts ORDER BY seq').all() as Array<{ account_id: string }>).map(({ account_id }) => ({ account_id, ...this.usageOf(account_id) }));
  }
}
