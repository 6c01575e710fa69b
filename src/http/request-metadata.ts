import type { FastifyRequest } from 'fastify';

/** Event metadata for a command sent over HTTP: the request id ties the events to the logs, the account and key (if any) say who asked. */
export const requestMetadata = (request: FastifyRequest) => ({
  requestId: request.id,
  correlationId: request.id,
  ...(request.principal?.kind === 'account' ? { accountId: request.principal.accountId, keyId: request.principal.keyId } : {}),
});
