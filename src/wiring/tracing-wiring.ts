import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { batchCreatedBy } from '../http/batch-trace-root.js';
import { NO_TRACING, type Tracing } from '../observability/tracing.js';
import type { Lifecycle } from './lifecycle.js';
import type { Role } from './roles.js';

/** Probes and scrapes, every few seconds from every orchestrator: noise in a trace store. */
const UNTRACED_ROUTES = new Set(['/live', '/ready', '/metrics']);

/**
 * OpenTelemetry tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set. Opened first so it stops last:
 * the spans of everything else's stop are sent before it flushes. Unset, the OpenTelemetry
 * packages are never loaded.
 */
export async function openTracing(config: Config, roles: ReadonlySet<Role>, lifecycle: Lifecycle, logger: Logger): Promise<Tracing> {
  if (!config.otlpEndpoint) return NO_TRACING;
  const { OtlpTracing } = await import('../observability/otlp-tracing.js');
  const tracing = new OtlpTracing({ endpoint: config.otlpEndpoint, serviceName: config.serviceName, roles: [...roles] });
  lifecycle.opened('the trace exporter', () => tracing.shutdown().catch((error: unknown) => logger.warn({ err: error }, 'traces could not all be sent')));
  return tracing;
}

/** A span per answered request, named by method and route pattern. */
export function installHttpTracing(app: FastifyInstance, tracing: Tracing): void {
  if (tracing === NO_TRACING) return;
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url;
    if (route !== undefined && UNTRACED_ROUTES.has(route)) return;
    const rootOfBatch = batchCreatedBy(request);
    tracing.recordSpan(`${request.method} ${route ?? 'unmatched'}`, Date.now() - reply.elapsedTime, {
      kind: 'server',
      failed: reply.statusCode >= 500,
      attributes: {
        'http.request.method': request.method,
        ...(route !== undefined ? { 'http.route': route } : {}),
        'http.response.status_code': reply.statusCode,
        'spool.request_id': request.id,
        ...(rootOfBatch !== undefined ? { 'spool.batch.id': rootOfBatch } : {}),
      },
      ...(rootOfBatch !== undefined ? { rootOfBatch } : {}),
    });
  });
}
