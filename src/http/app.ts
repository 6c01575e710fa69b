import { randomUUID } from 'node:crypto';
import multipart from '@fastify/multipart';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { DEFAULT_HTTP_TIMEOUTS, type HttpTimeouts } from '../config.js';
import { installBearerAuth } from './bearer-auth.js';
import { installErrorHandling } from './error-handler.js';
import { OpenApiDocument } from './openapi.js';
import { type BatchRouteDeps, registerBatchRoutes } from './routes/batches.js';
import { type CompatRouteDeps, registerCompatRoutes } from './routes/compat.js';
import { type FileRouteDeps, registerFileRoutes } from './routes/files.js';
import { type HistoryRouteDeps, registerHistoryRoutes } from './routes/history.js';
import { type JobRouteDeps, registerJobRoutes } from './routes/jobs.js';
import { type SystemRouteDeps, registerSystemRoutes } from './routes/system.js';
import { type WeightRouteDeps, registerWeightRoutes } from './routes/weights.js';
import { limitIdleClients, slowClientOptions } from './slow-clients.js';

export const SERVICE_VERSION = '0.1.0';

export interface HttpDeps extends FileRouteDeps, SystemRouteDeps, BatchRouteDeps, JobRouteDeps, CompatRouteDeps, WeightRouteDeps, HistoryRouteDeps {
  readonly logger: Logger;
  readonly apiKey: string;
  readonly timeouts?: HttpTimeouts;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export async function buildHttpApp(deps: HttpDeps): Promise<FastifyInstance> {
  const app: FastifyInstance = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    // A caller's own request id is kept when it is safe to log and echo; otherwise one is made.
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    logController: new LogController({ requestIdLogLabel: 'request_id' }),
    bodyLimit: 1024 * 1024,
    return503OnClosing: true,
    ...slowClientOptions(deps.timeouts ?? DEFAULT_HTTP_TIMEOUTS),
  });
  limitIdleClients(app.server);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  const openapi = new OpenApiDocument({
    title: 'Spool',
    version: SERVICE_VERSION,
    description: 'Batch inference and weight sync, OpenAI-compatible.',
  });
  app.addHook('onRoute', (route) => openapi.register(route));

  installErrorHandling(app);
  installBearerAuth(app, deps.apiKey);
  await app.register(multipart, {
    limits: {
      // The route enforces the per-purpose limits with a message naming them; this is a backstop.
      fileSize: deps.limits.maxFileBytes + 1,
      files: 1,
      fields: 8,
      fieldSize: 64 * 1024,
      parts: 10,
      headerPairs: 100,
    },
  });

  registerSystemRoutes(app, deps, openapi);
  registerFileRoutes(app, deps);
  registerBatchRoutes(app, deps);
  registerJobRoutes(app, deps);
  registerCompatRoutes(app, deps);
  registerWeightRoutes(app, deps);
  registerHistoryRoutes(app, deps);
  return app;
}

/** A processor's HTTP server: only /live, /ready and /openapi.json, for health probes. */
export async function buildHealthApp(deps: SystemRouteDeps & { readonly logger: Logger; readonly timeouts?: HttpTimeouts }): Promise<FastifyInstance> {
  const app: FastifyInstance = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    disableRequestLogging: true,
    return503OnClosing: true,
    ...slowClientOptions(deps.timeouts ?? DEFAULT_HTTP_TIMEOUTS),
  });
  limitIdleClients(app.server);
  const openapi = new OpenApiDocument({ title: 'Spool processor', version: SERVICE_VERSION, description: 'Health of one Spool processor.' });
  app.addHook('onRoute', (route) => openapi.register(route));
  installErrorHandling(app);
  registerSystemRoutes(app, deps, openapi);
  return app;
}
