import type { FastifyRequest } from 'fastify';

/** Event metadata for a command sent over HTTP: the request id ties the events to the logs. */
export const requestMetadata = (request: FastifyRequest) => ({ requestId: request.id, correlationId: request.id });
