import { beforeEach, describe, expect, it } from 'vitest';
import { type AccountEvent, NO_LIMITS, accountDecider } from '../../src/domain/account.js';
import { deciderSpec } from '../support/decider-spec.js';

const spec = deciderSpec(accountDecider);
const digest = (fill: string) => fill.repeat(64);
const opened: AccountEvent = { type: 'AccountOpened', data: { account_id: 'acme', created_at: 100 } };
const firstKey: AccountEvent = { type: 'AccountKeyAdded', data: { account_id: 'acme', key_id: 'key_aaaaaaaaaaaaaaaaaaaaaaaa', key_sha256: digest('a'), created_at: 100 } };
const secondKey: AccountEvent = { type: 'AccountKeyAdded', data: { account_id: 'acme', key_id: 'key_bbbbbbbbbbbbbbbbbbbbbbbb', key_sha256: digest('b'), created_at: 200 } };
const revoked: AccountEvent = { type: 'AccountKeyRevoked', data: { account_id: 'acme', key_id: 'key_aaaaaaaaaaaaaaaaaaaaaaaa', revoked_at: 300 } };

describe('Account aggregate', () => {
  // The given/when/then helper asserts; every test here must have made an assertion through it.
  beforeEach(() => {
    expect.hasAssertions();
  });

  it('opens an account with its first key', () => {
    spec.given([]).when({ type: 'OpenAccount', accountId: 'acme', keyId: 'key_aaaaaaaaaaaaaaaaaaaaaaaa', keySha256: digest('a'), at: 100 }).then([opened, firstKey]);
    spec.given([opened, firstKey]).thenState({ status: 'open', accountId: 'acme', createdAt: 100, keys: [{ key_id: 'key_aaaaaaaaaaaaaaaaaaaaaaaa', key_sha256: digest('a'), created_at: 100, revoked_at: null }], limits: NO_LIMITS });
  });

  it('refuses an account id twice, and ids that cannot name a stream or a prefix', () => {
    spec.given([opened, firstKey]).when({ type: 'OpenAccount', accountId: 'acme', keyId: 'key_cccccccccccccccccccccccc', keySha256: digest('c'), at: 200 }).thenRejects({ kind: 'conflict', param: 'account_id' });
    for (const accountId of ['', 'with space', '../up', '-lead', 'x'.repeat(65), 'slash/inside']) {
      spec.given([]).when({ type: 'OpenAccount', accountId, keyId: 'key_cccccccccccccccccccccccc', keySha256: digest('c'), at: 200 }).thenRejects({ kind: 'invalid', param: 'account_id' });
    }
  });

  it('adds keys to an open account only', () => {
    spec.given([opened, firstKey]).when({ type: 'AddAccountKey', accountId: 'acme', keyId: 'key_bbbbbbbbbbbbbbbbbbbbbbbb', keySha256: digest('b'), at: 200 }).then([secondKey]);
    spec.given([]).when({ type: 'AddAccountKey', accountId: 'acme', keyId: 'key_bbbbbbbbbbbbbbbbbbbbbbbb', keySha256: digest('b'), at: 200 }).thenRejects({ kind: 'not_found', param: 'account_id' });
  });

  it('revokes a key once; again changes nothing; an unknown key is not found', () => {
    spec.given([opened, firstKey, secondKey]).when({ type: 'RevokeAccountKey', accountId: 'acme', keyId: 'key_aaaaaaaaaaaaaaaaaaaaaaaa', at: 300 }).then([revoked]);
    spec.given([opened, firstKey, secondKey, revoked]).when({ type: 'RevokeAccountKey', accountId: 'acme', keyId: 'key_aaaaaaaaaaaaaaaaaaaaaaaa', at: 400 }).then([]);
    spec.given([opened, firstKey]).when({ type: 'RevokeAccountKey', accountId: 'acme', keyId: 'key_ffffffffffffffffffffffff', at: 300 }).thenRejects({ kind: 'not_found', param: 'key_id' });
    spec.given([]).when({ type: 'RevokeAccountKey', accountId: 'acme', keyId: 'key_aaaaaaaaaaaaaaaaaaaaaaaa', at: 300 }).thenRejects({ kind: 'not_found', param: 'account_id' });
  });

  it('sets limits, all three at once; the same again records nothing; a negative or fractional one is refused', () => {
    const limits = { queued_lines: 1000, queued_tokens: null, stored_bytes: 1 << 20 };
    const set: AccountEvent = { type: 'AccountLimitsSet', data: { account_id: 'acme', ...limits, set_at: 500 } };
    spec.given([opened, firstKey]).when({ type: 'SetAccountLimits', accountId: 'acme', limits, at: 500 }).then([set]);
    spec.given([opened, firstKey, set]).when({ type: 'SetAccountLimits', accountId: 'acme', limits, at: 600 }).then([]);
    spec.given([opened, firstKey]).when({ type: 'SetAccountLimits', accountId: 'acme', limits: { ...limits, queued_lines: -1 }, at: 500 }).thenRejects({ kind: 'invalid', param: 'queued_lines' });
    spec.given([opened, firstKey]).when({ type: 'SetAccountLimits', accountId: 'acme', limits: { ...limits, stored_bytes: 1.5 }, at: 500 }).thenRejects({ kind: 'invalid', param: 'stored_bytes' });
    spec.given([]).when({ type: 'SetAccountLimits', accountId: 'acme', limits, at: 500 }).thenRejects({ kind: 'not_found', param: 'account_id' });
  });
});
