import type { FastifyInstance } from 'fastify';
import { ApiError } from '../api-error.js';
import type { OpenApiDocument } from '../openapi.js';

export interface ReadinessReport {
  /** This process can do its job (false: 503). */
  readonly ready: boolean;
  /** Why it is not ready, in words safe to show anyone (no path, address or host name). */
  readonly reasons: readonly string[];
  /** What works only in part while the process still serves, in the same words. */
  readonly degraded: readonly string[];
  readonly details: Record<string, unknown>;
}

export interface SystemRouteDeps {
  readiness(): ReadinessReport;
}

/** Loose on purpose: the body may gain fields (readiness details) without the description changing. */
const statusDoc = (status: string) => ({
  description: status === 'ready' ? 'Ready; details of what was checked may follow' : 'Live',
  content: { 'application/json': { schema: { type: 'object', required: ['status'], properties: { status: { type: 'string', enum: [status] } } } } },
});

export function registerSystemRoutes(app: FastifyInstance, deps: SystemRouteDeps, openapi: OpenApiDocument): void {
  app.get(
    '/live',
    { schema: { summary: 'Liveness: the process is up and serving HTTP', tags: ['system'] }, config: { openapi: { responses: { 200: statusDoc('live') } } } },
    async () => ({ status: 'live' }),
  );

  app.get(
    '/ready',
    {
      schema: {
        summary: 'Readiness: 200 while this process can do its job (status "degraded" lists what works only in part), 503 naming what it waits for',
        tags: ['system'],
      },
      config: { openapi: { responses: { 200: statusDoc('ready') } } },
    },
    async (_request, reply) => {
      const report = deps.readiness();
      if (!report.ready) {
        throw new ApiError(503, `Service is not ready: ${report.reasons.join('; ')}`, 'service_unavailable', 'not_ready');
      }
      const status = report.degraded.length > 0 ? 'degraded' : 'ready';
      return reply.status(200).send({ status, degraded: report.degraded, ...report.details });
    },
  );

  app.get(
    '/openapi.json',
    {
      schema: { summary: 'This service description (OpenAPI 3.1)', tags: ['system'] },
      config: { openapi: { responses: { 200: { description: 'OpenAPI 3.1', content: { 'application/json': { schema: { type: 'object', required: ['openapi', 'info', 'paths'], properties: { openapi: { type: 'string' }, info: { type: 'object' }, paths: { type: 'object' } } } } } } } } },
    },
    async () => openapi.toJSON(),
  );
}
