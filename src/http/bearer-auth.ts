import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { ApiError } from './api-error.js';

/** Path prefixes that need `Authorization: Bearer <API_KEY>` (spec §5). */
export const PROTECTED_PREFIXES = ['/mgmt/', '/compat/'];

const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * Checks the bearer token before routing, so an unauthenticated caller learns nothing, not even
 * which routes exist. Digests of equal length make the comparison constant-time whatever is sent.
 */
export function installBearerAuth(app: FastifyInstance, apiKey: string): void {
  const expected = digest(apiKey);
  app.addHook('onRequest', async (request) => {
    if (!PROTECTED_PREFIXES.some((prefix) => request.url.startsWith(prefix))) return;
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
  });
}
