import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Clock } from '../platform/clock.js';
import type { Config } from '../config.js';
import { OutboundTargets } from '../platform/outbound-targets.js';
import type { UploadLimits } from '../domain/file.js';
import { buildHealthApp, buildHttpApp } from '../http/app.js';
import type { ReadinessReport } from '../http/routes/system.js';
import { ExitCode, StartupFailure } from '../process/startup-failure.js';
import type { Metrics } from '../observability/metrics.js';
import type { Lifecycle } from './lifecycle.js';
import { installHttpMetrics } from './metrics-wiring.js';
import type { Tracing } from '../observability/tracing.js';
import { installHttpTracing } from './tracing-wiring.js';
import type { ProcessParts } from './parts.js';
import type { Role } from './roles.js';

/**
 * The HTTP server: the whole API in a process with the api role, /live and /ready only otherwise.
 * Opened last, since it serves everything, so it is the first to stop: in-flight requests finish
 * while what they use is still open.
 */
export async function openHttpServer(
  roles: ReadonlySet<Role>,
  context: { config: Config; clock: Clock; logger: Logger; apiKey: string; limits: UploadLimits; parts: ProcessParts; lifecycle: Lifecycle; readiness: () => ReadinessReport; metrics: Metrics; tracing: Tracing },
): Promise<FastifyInstance> {
  const { config, clock, logger, apiKey, limits, parts, lifecycle, readiness, metrics, tracing } = context;
  let app: FastifyInstance;
  if (roles.has('api')) {
    const { files, owned, jobs, batches, jobsQueries, historyFeed, changeFeed, weightSync, weightsQueries, webhooks, webhooksQueries, accounts, accountsQueries } = parts.application();
    const { fleet } = await parts.fleet();
    app = await buildHttpApp({ logger, apiKey, accountsMode: config.accounts, webhookTargets: new OutboundTargets(config.webhookAllowedTargets), files, owned, jobs, batches, jobsQueries, historyFeed, changeFeed, fleet, weightSync, weightsQueries, webhooks, webhooksQueries, accounts, accountsQueries, clock, limits, readiness, timeouts: config.http, installBeforeRoutes: (built) => {
      installHttpMetrics(built, metrics, config.metricsPort === undefined);
      installHttpTracing(built, tracing);
    } });
  } else {
    app = await buildHealthApp({ logger, readiness, timeouts: config.http, installBeforeRoutes: (built) => installHttpMetrics(built, metrics, config.metricsPort === undefined) });
  }

  // Requests being answered, for a stop that says what it waits for.
  let requestsInFlight = 0;
  app.server.on('request', (_request, response) => {
    requestsInFlight++;
    response.once('close', () => requestsInFlight--);
  });
  lifecycle.reportWhileStopping(() => (requestsInFlight > 0 ? `${requestsInFlight} HTTP request${requestsInFlight === 1 ? '' : 's'} in flight` : undefined));
  lifecycle.opened('the HTTP server', () => {
    // In-flight requests finish; keep-alive connections are closed as soon as they fall idle,
    // including those whose last response was still being written when closing began.
    const idleSweep = setInterval(() => app.server.closeIdleConnections(), 100);
    return app.close().finally(() => clearInterval(idleSweep));
  });
  return app;
}

/** Listens on HOST:PORT; a host or port that cannot be had is a configuration mistake named as such. */
export async function listen(app: FastifyInstance, config: Config): Promise<string> {
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const where = `${config.host}:${config.port}`;
    if (code === 'EADDRINUSE') throw new StartupFailure(`PORT ${config.port} on HOST ${config.host} is already in use`, ExitCode.config, { cause: error });
    if (code === 'EACCES') throw new StartupFailure(`PORT ${config.port} on HOST ${config.host} needs privileges this process lacks`, ExitCode.config, { cause: error });
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EADDRNOTAVAIL' || code === 'EAI_NONAME') {
      throw new StartupFailure(`HOST ${config.host} cannot be listened on (${code}): it must be an address or a name of this machine, e.g. 0.0.0.0 or 127.0.0.1 (listening on ${where})`, ExitCode.config, { cause: error });
    }
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  return `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
}
