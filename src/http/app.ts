import multipart from '@fastify/multipart';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { newRequestId } from '../platform/ids.js';
import { CREDENTIAL_REDACTION, censorsCredentials } from '../observability/credential-censor.js';
import { notFound } from './api-error.js';
import { type AccountKeys, installAccountAuth } from './account-auth.js';
import { PROTECTED_PREFIXES, installBearerAuth } from './bearer-auth.js';
import { MAX_PATH_PARAMETER_LENGTH, answerClientError, answerFrameworkError, answerUnmetExpectation, installErrorHandling } from './error-handler.js';
import { installJsonBodyParser } from './json-body.js';
import { DOCS_PAGE } from './docs-page.js';
import type { HttpTimeouts } from './http-settings.js';
import { OpenApiDocument } from './openapi.js';
import { installRequestChecks } from './request-checks.js';
import { compileRequestValidator } from './request-validation.js';
import { type AccountRouteDeps, registerAccountRoutes } from './routes/accounts.js';
import { type BatchRouteDeps, registerBatchRoutes } from './routes/batches.js';
import { type CompatRouteDeps, registerCompatRoutes } from './routes/compat.js';
import { type FileRouteDeps, registerFileRoutes } from './routes/files.js';
import { type ChangeRouteDeps, registerChangeRoutes } from './routes/changes.js';
import { type HistoryRouteDeps, registerHistoryRoutes } from './routes/history.js';
import { registerConsoleRoutes } from './console/console-routes.js';
import { type JobRouteDeps, registerJobRoutes } from './routes/jobs.js';
import { type SystemRouteDeps, registerSystemRoutes } from './routes/system.js';
import { type WeightRouteDeps, registerWeightRoutes } from './routes/weights.js';
import { type WebhookRouteDeps, registerWebhookRoutes } from './routes/webhooks.js';
import { limitIdleClients, slowClientOptions } from './slow-clients.js';
import { UPLOAD_FIELD_SIZE_LIMIT } from './upload-form.js';

export const SERVICE_VERSION = '0.1.0';

export interface HttpDeps extends FileRouteDeps, SystemRouteDeps, BatchRouteDeps, JobRouteDeps, CompatRouteDeps, WeightRouteDeps, HistoryRouteDeps, ChangeRouteDeps, WebhookRouteDeps, AccountRouteDeps {
  readonly logger: Logger;
  readonly apiKey: string;
  /** ACCOUNTS: off (the spec's open `/v1`) or required (an account's key on every `/v1` request). */
  readonly accountsMode: 'off' | 'required';
  readonly accountsQueries: AccountRouteDeps['accountsQueries'] & AccountKeys;
  readonly timeouts: HttpTimeouts;
  /** Hooks and routes the process adds (its metrics), after the error handling and before the routes. */
  readonly installBeforeRoutes?: (app: FastifyInstance) => void;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Whatever layer refuses a request (Node's parser, the router, Fastify), the answer is JSON in
 * the error envelope or the 422 validation shape. Node's bare 400 for a missing Host is replaced
 * by a check of our own (request-checks.ts).
 */
const ANSWER_EVERY_ERROR_AS_JSON = {
  frameworkErrors: answerFrameworkError,
  clientErrorHandler: answerClientError,
  routerOptions: { maxParamLength: MAX_PATH_PARAMETER_LENGTH },
  http: { requireHostHeader: false },
} as const;

/** Both servers' options: slow clients held to the timeouts, and every refusal in JSON. */
function serverOptions(timeouts: HttpTimeouts) {
  const slow = slowClientOptions(timeouts);
  return { ...slow, ...ANSWER_EVERY_ERROR_AS_JSON, http: { ...slow.http, ...ANSWER_EVERY_ERROR_AS_JSON.http } };
}

export async function buildHttpApp(deps: HttpDeps): Promise<FastifyInstance> {
  const app: FastifyInstance = Fastify({
    // Credentials never reach a log line, at any level: @fastify/multipart logs its parser's options,
    // the request's headers among them, at trace. The process's logger censors every line it
    // writes; one given from elsewhere that does not, redacts where headers appear.
    loggerInstance: (censorsCredentials(deps.logger) ? deps.logger : deps.logger.child({}, { redact: CREDENTIAL_REDACTION })) as FastifyBaseLogger,
    // A caller's own request id is kept when it is safe to log and echo; otherwise one is made.
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : newRequestId();
    },
    logController: new LogController({ requestIdLogLabel: 'request_id' }),
    bodyLimit: 1024 * 1024,
    return503OnClosing: true,
    ...serverOptions(deps.timeouts),
  });
  limitIdleClients(app.server);
  app.setValidatorCompiler(compileRequestValidator);
  answerUnmetExpectation(app);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  // Before anything else sees a route: the checks are attached to each protected route itself.
  installBearerAuth(app, deps.apiKey);
  installAccountAuth(app, deps.accountsMode, deps.accountsQueries);
  const openapi = new OpenApiDocument({
    title: 'Spool',
    version: SERVICE_VERSION,
    description: 'Batch inference and weight sync, OpenAI-compatible.',
  });
  app.addHook('onRoute', (route) => openapi.register(route));

  installErrorHandling(app);
  installRequestChecks(app);
  installJsonBodyParser(app);
  await app.register(multipart, {
    limits: {
      // The route enforces the per-purpose limits with a message naming them; this is a backstop.
      fileSize: deps.limits.maxFileBytes + 1,
      files: 1,
      fields: 8,
      fieldSize: UPLOAD_FIELD_SIZE_LIMIT,
      parts: 10,
      headerPairs: 100,
    },
  });

  deps.installBeforeRoutes?.(app);
  registerSystemRoutes(app, deps, openapi);
  registerFileRoutes(app, deps);
  registerBatchRoutes(app, deps);
  registerJobRoutes(app, deps);
  registerCompatRoutes(app, deps);
  registerWeightRoutes(app, deps);
  registerHistoryRoutes(app, deps);
  registerChangeRoutes(app, deps);
  registerConsoleRoutes(app);
  registerWebhookRoutes(app, deps);
  registerAccountRoutes(app, deps);
  app.get(
    '/docs',
    {
      schema: { summary: 'This service description as a page to read (rendered from /openapi.json)', tags: ['system'] },
      config: { openapi: { responses: { 200: { description: 'A self-contained HTML page', content: { 'text/html': { schema: { type: 'string' } } } } } } },
    },
    async (_request, reply) => reply.type('text/html; charset=utf-8').header('content-security-policy', "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'").send(DOCS_PAGE),
  );
  // Unknown paths under a protected prefix are protected routes too: without the token a caller
  // learns nothing of which routes exist there.
  for (const prefix of PROTECTED_PREFIXES) {
    app.all(`${prefix}*`, async (request) => {
      throw notFound(`Unknown route: ${request.method} ${request.url.split('?')[0]}`);
    });
  }
  return app;
}

/** A processor's HTTP server: only /live, /ready and /openapi.json, for health probes. */
export async function buildHealthApp(deps: SystemRouteDeps & { readonly logger: Logger; readonly timeouts: HttpTimeouts; readonly installBeforeRoutes?: (app: FastifyInstance) => void }): Promise<FastifyInstance> {
  const app: FastifyInstance = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    disableRequestLogging: true,
    return503OnClosing: true,
    ...serverOptions(deps.timeouts),
  });
  limitIdleClients(app.server);
  answerUnmetExpectation(app);
  const openapi = new OpenApiDocument({ title: 'Spool processor', version: SERVICE_VERSION, description: 'Health of one Spool processor.' });
  app.addHook('onRoute', (route) => openapi.register(route));
  installErrorHandling(app);
  deps.installBeforeRoutes?.(app);
  registerSystemRoutes(app, deps, openapi);
  return app;
}
