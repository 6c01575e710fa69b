// The Account aggregate: who owns files, batches and their results when accounts are required
// (ACCOUNTS=required), and the keys that speak for it. A key is held only as its SHA-256 digest;
// the key itself is shown once, to whoever opened the account or added the key. Pure decide/evolve.
import * as E from 'fp-ts/lib/Either.js';
import type { Decider } from './decider.js';
import { type Rejection, reject } from './rejection.js';

/** An account id: letters, digits, `.`, `_` and `-`, 1 to 64 of them (it names a stream and a blob prefix). */
export const ACCOUNT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export interface AccountKey {
  readonly key_id: string;
  /** Hex SHA-256 of the key. */
  readonly key_sha256: string;
  readonly created_at: number;
  readonly revoked_at: number | null;
}

/** What an account may hold at once; null: no limit. */
export interface AccountLimits {
  /** Lines of its batches not yet ended (validating, in progress, finalizing, cancelling), this batch's included. */
  readonly queued_lines: number | null;
  /** Estimated input tokens of those batches (see estimatedTokens), as OpenAI's enqueued-token limit. */
  readonly queued_tokens: number | null;
  /** Bytes of its files not deleted or expired. */
  readonly stored_bytes: number | null;
}

export const NO_LIMITS: AccountLimits = { queued_lines: null, queued_tokens: null, stored_bytes: null };

export type AccountState =
  | { readonly status: 'absent' }
  | { readonly status: 'open'; readonly accountId: string; readonly createdAt: number; readonly keys: readonly AccountKey[]; readonly limits: AccountLimits };

export const initialAccountState: AccountState = { status: 'absent' };

export type AccountCommand =
  | { readonly type: 'OpenAccount'; readonly accountId: string; readonly keyId: string; readonly keySha256: string; readonly at: number }
  | { readonly type: 'AddAccountKey'; readonly accountId: string; readonly keyId: string; readonly keySha256: string; readonly at: number }
  | { readonly type: 'RevokeAccountKey'; readonly accountId: string; readonly keyId: string; readonly at: number }
  | { readonly type: 'SetAccountLimits'; readonly accountId: string; readonly limits: AccountLimits; readonly at: number };

export type AccountEvent =
  | { readonly type: 'AccountOpened'; readonly data: { readonly account_id: string; readonly created_at: number } }
  | { readonly type: 'AccountKeyAdded'; readonly data: { readonly account_id: string; readonly key_id: string; readonly key_sha256: string; readonly created_at: number } }
  | { readonly type: 'AccountKeyRevoked'; readonly data: { readonly account_id: string; readonly key_id: string; readonly revoked_at: number } }
  | { readonly type: 'AccountLimitsSet'; readonly data: AccountLimits & { readonly account_id: string; readonly set_at: number } };

export function decideAccount(command: AccountCommand, state: AccountState): E.Either<Rejection, AccountEvent[]> {
  switch (command.type) {
    case 'OpenAccount':
      if (!ACCOUNT_ID.test(command.accountId)) {
        return reject('invalid', `Invalid account_id ${JSON.stringify(command.accountId.slice(0, 80))}: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`, 'account_id');
      }
      if (state.status === 'open') return reject('conflict', `Account ${JSON.stringify(command.accountId)} already exists`, 'account_id');
      return E.right([
        { type: 'AccountOpened', data: { account_id: command.accountId, created_at: command.at } },
        { type: 'AccountKeyAdded', data: { account_id: command.accountId, key_id: command.keyId, key_sha256: command.keySha256, created_at: command.at } },
      ]);
    case 'AddAccountKey':
      if (state.status !== 'open') return reject('not_found', `No such account: ${command.accountId}`, 'account_id');
      return E.right([{ type: 'AccountKeyAdded', data: { account_id: command.accountId, key_id: command.keyId, key_sha256: command.keySha256, created_at: command.at } }]);
    case 'RevokeAccountKey': {
      if (state.status !== 'open') return reject('not_found', `No such account: ${command.accountId}`, 'account_id');
      const key = state.keys.find((candidate) => candidate.key_id === command.keyId);
      if (!key) return reject('not_found', `No such key of account ${command.accountId}: ${command.keyId}`, 'key_id');
      // Revoking a revoked key again changes nothing (a retried DELETE).
      if (key.revoked_at !== null) return E.right([]);
      return E.right([{ type: 'AccountKeyRevoked', data: { account_id: command.accountId, key_id: command.keyId, revoked_at: command.at } }]);
    }
    case 'SetAccountLimits': {
      if (state.status !== 'open') return reject('not_found', `No such account: ${command.accountId}`, 'account_id');
      for (const [name, value] of Object.entries(command.limits)) {
        if (value !== null && !(Number.isSafeInteger(value) && value >= 0)) return reject('invalid', `${name} must be a whole number of at least 0, or null for no limit`, name);
      }
      const { queued_lines, queued_tokens, stored_bytes } = command.limits;
      if (queued_lines === state.limits.queued_lines && queued_tokens === state.limits.queued_tokens && stored_bytes === state.limits.stored_bytes) return E.right([]);
      return E.right([{ type: 'AccountLimitsSet', data: { account_id: command.accountId, queued_lines, queued_tokens, stored_bytes, set_at: command.at } }]);
    }
  }
}

export function evolveAccount(state: AccountState, event: AccountEvent): AccountState {
  switch (event.type) {
    case 'AccountOpened':
      return { status: 'open', accountId: event.data.account_id, createdAt: event.data.created_at, keys: [], limits: NO_LIMITS };
    case 'AccountKeyAdded':
      if (state.status !== 'open') return state;
      return { ...state, keys: [...state.keys, { key_id: event.data.key_id, key_sha256: event.data.key_sha256, created_at: event.data.created_at, revoked_at: null }] };
    case 'AccountKeyRevoked':
      if (state.status !== 'open') return state;
      return { ...state, keys: state.keys.map((key) => (key.key_id === event.data.key_id ? { ...key, revoked_at: event.data.revoked_at } : key)) };
    case 'AccountLimitsSet': {
      if (state.status !== 'open') return state;
      const { queued_lines, queued_tokens, stored_bytes } = event.data;
      return { ...state, limits: { queued_lines, queued_tokens, stored_bytes } };
    }
  }
}

export const accountDecider: Decider<AccountCommand, AccountState, AccountEvent> = { decide: decideAccount, evolve: evolveAccount, initialState: initialAccountState };
