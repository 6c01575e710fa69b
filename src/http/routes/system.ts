import type { FastifyInstance } from 'fastify';
import { ApiError } from '../api-error.js';
import type { OpenApiDocument } from '../openapi.js';

export interface ReadinessReport {
  readonly ready: boolean;
  /** Why the service is not ready, when it is not. */
  readonly reason?: string;
  readonly details: Record<string, unknown>;
}

export interface SystemRouteDeps {
  readiness(): ReadinessReport;
}

export function registerSystemRoutes(app: FastifyInstance, deps: SystemRouteDeps, openapi: OpenApiDocument): void {
  app.get('/live', { schema: { summary: 'Liveness: the process is up and serving HTTP', tags: ['system'] } }, async () => ({ status: 'live' }));

  app.get(
    '/ready',
    { schema: { summary: 'Readiness: the event store is open and the read models have caught up', tags: ['system'] } },
    async (_request, reply) => {
      const report = deps.readiness();
      if (!report.ready) {
        throw new ApiError(503, `Service is not ready: ${report.reason ?? 'starting'}`, 'service_unavailable', 'not_ready');
      }
      return reply.status(200).send({ status: 'ready', ...report.details });
    },
  );

  app.get('/openapi.json', { schema: { summary: 'This service description (OpenAPI 3.1)', tags: ['system'] } }, async () => openapi.toJSON());
}
