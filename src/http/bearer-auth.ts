import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest, RouteOptions, onRequestHookHandler } from 'fastify';
import { ApiError } from './api-error.js';

/** Path prefixes whose routes need `Authorization: Bearer <API_KEY>` (spec §5). */
export const PROTECTED_PREFIXES = ['/mgmt/', '/compat/'];

/** The OpenAPI security requirement of a protected route. */
export const BEARER_SECURITY = [{ bearer: [] }];

const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * Attaches the bearer check to each protected route as it is registered, so it runs for exactly
 * the requests that routing sends to that route, however their URL was spelled (percent-encoded,
 * doubled slashes, any case the router accepts). A check on the raw URL string would disagree
 * with the router, which decodes before it matches. A route is protected when it is registered
 * under a protected prefix or declares bearer security: forgetting either still protects it.
 * Digests of equal length make the comparison constant-time whatever is sent.
 */
export function installBearerAuth(app: FastifyInstance, apiKey: string): void {
  const check = bearerCheck(apiKey);
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!isProtected(route)) return;
    const existing = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
    // First, before any other hook of the route can act on the request.
    route.onRequest = [check, ...existing];
    const schema = (route.schema ?? {}) as { security?: unknown };
    if (schema.security === undefined) route.schema = { ...schema, security: BEARER_SECURITY };
  });
}

function isProtected(route: RouteOptions): boolean {
  const declared = ((route.schema ?? {}) as { security?: Array<Record<string, unknown>> }).security;
  return PROTECTED_PREFIXES.some((prefix) => route.url.startsWith(prefix)) || (declared ?? []).some((requirement) => 'bearer' in requirement);
}

function bearerCheck(apiKey: string): onRequestHookHandler {
  const expected = digest(apiKey);
  return async function requireBearer(request: FastifyRequest) {
    const header = request.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match || !timingSafeEqual(digest(match[1]!), expected)) {
      throw new ApiError(
        401,
        match ? 'Incorrect API key provided' : 'Missing bearer token: send Authorization: Bearer <API_KEY>',
        'invalid_request_error',
        'invalid_api_key',
      );
    }
  };
}
