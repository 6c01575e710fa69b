import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest, RouteOptions, onRequestHookHandler } from 'fastify';
import { keyDigest } from '../application/account-registry.js';
import { ID_PREFIX } from '../domain/id-prefixes.js';
import { OPEN_PRINCIPAL, type Principal } from '../domain/principal.js';
import { ApiError } from './api-error.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is asking: the open principal with accounts off, and on every route outside `/v1`. */
    principal: Principal;
  }
}

/** The routes an account's key opens (ACCOUNTS=required): the OpenAI-compatible surface. */
const ACCOUNT_PREFIX = '/v1/';

/** What authentication needs of the accounts read model. */
export interface AccountKeys {
  activeKey(keyId: string): { account_id: string; key_sha256: string } | undefined;
}

const KEY = new RegExp(`^${ID_PREFIX.accountSecret.replace(/-/g, '\\-')}([0-9a-f]{24})\\.[A-Za-z0-9_-]{43}$`);
/** Compared against when the key's id is unknown, so that an unknown id costs what a wrong key does. */
const NO_DIGEST = Buffer.from(keyDigest(''), 'hex');

/**
 * The one authentication hook: turns a request's credential into the principal every command and
 * query of the request carries. With ACCOUNTS=required every `/v1` route (attached as it is
 * registered, so it runs for exactly what routing sends there) needs `Authorization: Bearer
 * <account key>`; a missing, unknown or revoked key is refused with 401 before anything is read.
 * Keys are looked up in this process's read models at each request: a revocation holds as soon as
 * the projector has read it (within a second on every event store).
 */
export function installAccountAuth(app: FastifyInstance, mode: 'off' | 'required', keys: AccountKeys): void {
  app.decorateRequest('principal', null as never);
  app.addHook('onRequest', async (request) => {
    request.principal = OPEN_PRINCIPAL;
  });
  if (mode === 'off') return;
  const check = accountCheck(keys);
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!route.url.startsWith(ACCOUNT_PREFIX)) return;
    const existing = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
    route.onRequest = [check, ...existing];
    const schema = (route.schema ?? {}) as { security?: unknown };
    if (schema.security === undefined) route.schema = { ...schema, security: [{ accountKey: [] }] };
  });
}

function accountCheck(keys: AccountKeys): onRequestHookHandler {
  return async function requireAccountKey(request: FastifyRequest) {
    const header = request.headers.authorization ?? '';
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
    if (bearer === undefined) throw new ApiError(401, 'Missing bearer token: send Authorization: Bearer <account key> (ACCOUNTS=required)', 'invalid_request_error', 'invalid_api_key');
    const keyId = KEY.exec(bearer)?.[1];
    const key = keyId === undefined ? undefined : keys.activeKey(`${ID_PREFIX.accountKey}${keyId}`);
    const matches = timingSafeEqual(Buffer.from(keyDigest(bearer), 'hex'), key ? Buffer.from(key.key_sha256, 'hex') : NO_DIGEST);
    if (!key || !matches) throw new ApiError(401, 'Incorrect API key provided', 'invalid_request_error', 'invalid_api_key');
    request.principal = { kind: 'account', accountId: key.account_id, keyId: `${ID_PREFIX.accountKey}${keyId}` };
  };
}
