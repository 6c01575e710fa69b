import type { FastifyInstance } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import type { AccountRegistry } from '../../application/account-registry.js';
import type { AccountsQueries } from '../../../projections/accounts-projection.js';
import type { AccountLimits } from '../../domain/account.js';
import { fromRejection, notFound } from '../api-error.js';
import { httpSchema } from '../../platform/schemas.js';
import { requestMetadata } from '../request-metadata.js';

export interface AccountRouteDeps {
  readonly accounts: AccountRegistry;
  readonly accountsQueries: AccountsQueries;
}

/**
 * Operators open accounts and manage their keys (bearer API_KEY, under /mgmt/v1). A key is in the
 * answer that made it and nowhere else: lists show key ids, never keys, and the log holds digests.
 */
export function registerAccountRoutes(app: FastifyInstance, deps: AccountRouteDeps): void {
  const security = [{ bearer: [] }];
  const accountParams = httpSchema('AccountIdParams');

  app.post(
    '/mgmt/v1/accounts',
    { schema: { summary: 'Open an account (201, with its first key, shown once)', tags: ['accounts'], security, body: httpSchema('OpenAccountRequest'), response: { 201: httpSchema('AccountKey') } } },
    async (request, reply) => {
      const { account_id } = request.body as { account_id: string };
      const opened = await deps.accounts.open(account_id, requestMetadata(request));
      if (E.isLeft(opened)) throw fromRejection(opened.left);
      return reply.status(201).send({ object: 'account.key' as const, ...opened.right });
    },
  );

  app.get(
    '/mgmt/v1/accounts',
    { schema: { summary: "List accounts and their keys' ids (never the keys)", tags: ['accounts'], security, response: { 200: httpSchema('AccountList') } } },
    async () => ({ object: 'list' as const, data: deps.accountsQueries.list().map((account) => ({ object: 'account' as const, ...account })) }),
  );

  app.post(
    '/mgmt/v1/accounts/:account_id/keys',
    { schema: { summary: 'Add a key to an account (201, the key shown once)', tags: ['accounts'], security, params: accountParams, response: { 201: httpSchema('AccountKey') } } },
    async (request, reply) => {
      const { account_id } = request.params as { account_id: string };
      const added = await deps.accounts.addKey(account_id, requestMetadata(request));
      if (E.isLeft(added)) throw fromRejection(added.left);
      return reply.status(201).send({ object: 'account.key' as const, ...added.right });
    },
  );

  app.delete(
    '/mgmt/v1/accounts/:account_id/keys/:key_id',
    { schema: { summary: 'Revoke a key: refused from the next request on', tags: ['accounts'], security, params: httpSchema('AccountKeyParams'), response: { 200: httpSchema('RevokedAccountKey') } } },
    async (request) => {
      const { account_id, key_id } = request.params as { account_id: string; key_id: string };
      const revoked = await deps.accounts.revokeKey(account_id, key_id, requestMetadata(request));
      if (E.isLeft(revoked)) throw fromRejection(revoked.left);
      return { object: 'account.key' as const, ...revoked.right, revoked: true as const };
    },
  );

  app.put(
    '/mgmt/v1/accounts/:account_id/limits',
    { schema: { summary: "Set an account's limits (null: none): queued lines, queued tokens (estimated), stored bytes", tags: ['accounts'], security, params: accountParams, body: httpSchema('AccountLimits'), response: { 200: httpSchema('AccountUsage') } } },
    async (request) => {
      const { account_id } = request.params as { account_id: string };
      const set = await deps.accounts.setLimits(account_id, request.body as AccountLimits, requestMetadata(request));
      if (E.isLeft(set)) throw fromRejection(set.left);
      return { object: 'account.usage' as const, account_id, limits: set.right, usage: deps.accountsQueries.usageOf(account_id) };
    },
  );

  // The caller's own account: its limits and what it holds against them (404 with accounts off: there is no account).
  app.get(
    '/v1/account',
    { schema: { summary: "The calling account's limits and usage (ACCOUNTS=required)", tags: ['accounts'], response: { 200: httpSchema('AccountUsage') } } },
    async (request) => {
      const principal = request.principal;
      const limits = principal.kind === 'account' ? deps.accountsQueries.limitsOf(principal.accountId) : undefined;
      if (principal.kind !== 'account' || !limits) throw notFound('No account: accounts are off on this service (ACCOUNTS=required turns them on)');
      return { object: 'account.usage' as const, account_id: principal.accountId, limits, usage: deps.accountsQueries.usageOf(principal.accountId) };
    },
  );
}
