import { createHash } from 'node:crypto';
import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import { type AccountLimits, accountDecider } from '../domain/account.js';
import type { Rejection } from '../domain/rejection.js';
import { accountStreamName } from '../domain/stream-names.js';
import type { EventStore } from '../event-store/event-store.js';
import type { Clock } from '../platform/clock.js';
import { newAccountKey, newAccountKeyId } from '../platform/ids.js';
import { type CommandMetadata, type ReadModelsPosition, execute } from './command-handler.js';

/** The digest a key is kept and looked up as: hex SHA-256 (keys are 256 random bits, so no slow hash is needed). */
export const keyDigest = (key: string): string => createHash('sha256').update(key).digest('hex');

/** A key as made: shown in the answer that made it and nowhere else. */
export interface IssuedKey {
  readonly account_id: string;
  readonly key_id: string;
  readonly key: string;
}

/** Accounts and their keys (ACCOUNTS=required), opened and changed by the operator. */
export class AccountRegistry {
  constructor(private readonly deps: { eventStore: EventStore; projector: ReadModelsPosition; clock: Clock; log: Pick<Logger, 'warn'> }) {}

  /** Opens an account with its first key; the key is returned here and never again. */
  open(accountId: string, metadata: CommandMetadata): Promise<E.Either<Rejection, IssuedKey>> {
    return this.issueKey('OpenAccount', accountId, metadata);
  }

  /** Another key for the account; returned here and never again. */
  addKey(accountId: string, metadata: CommandMetadata): Promise<E.Either<Rejection, IssuedKey>> {
    return this.issueKey('AddAccountKey', accountId, metadata);
  }

  /** Makes a key, records its digest with the command, and hands the key back this once. */
  private async issueKey(type: 'OpenAccount' | 'AddAccountKey', accountId: string, metadata: CommandMetadata): Promise<E.Either<Rejection, IssuedKey>> {
    const keyId = newAccountKeyId();
    const key = newAccountKey(keyId);
    const outcome = await execute(this.deps, accountStreamName(accountId), accountDecider, { type, accountId, keyId, keySha256: keyDigest(key), at: this.deps.clock.nowSeconds() }, { metadata });
    return E.map(() => ({ account_id: accountId, key_id: keyId, key }))(outcome);
  }

  /** Revokes a key: this process refuses it once the revocation is in its read models (before this resolves). */
  async revokeKey(accountId: string, keyId: string, metadata: CommandMetadata): Promise<E.Either<Rejection, { account_id: string; key_id: string }>> {
    const outcome = await execute(this.deps, accountStreamName(accountId), accountDecider, { type: 'RevokeAccountKey', accountId, keyId, at: this.deps.clock.nowSeconds() }, { metadata });
    return E.map(() => ({ account_id: accountId, key_id: keyId }))(outcome);
  }

  /** Sets the account's limits, all three at once (null: no limit). */
  async setLimits(accountId: string, limits: AccountLimits, metadata: CommandMetadata): Promise<E.Either<Rejection, AccountLimits>> {
    const outcome = await execute(this.deps, accountStreamName(accountId), accountDecider, { type: 'SetAccountLimits', accountId, limits, at: this.deps.clock.nowSeconds() }, { metadata });
    return E.map(() => limits)(outcome);
  }
}
