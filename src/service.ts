import type Database from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { BlobDebrisSweeper } from '../processors/watches/blob-debris-sweeper.js';
import type { EventRelay } from '../processors/messaging/event-relay.js';
import type { FileExpirySweeper } from '../processors/watches/file-expiry-sweeper.js';
import type { Projector } from '../projections/projector.js';
import { resolveApiKey } from './process/api-key.js';
import type { BlobStore } from './blob-store/blob-store.js';
import { type Clock, systemClock } from './platform/clock.js';
import type { Config } from './config.js';
import type { UploadLimits } from './domain/file.js';
import type { Fleet } from './engine/fleet.js';
import type { EventStore } from './event-store/event-store.js';
import type { MessageLog } from './message-log/message-log.js';
import { createLogger } from './observability/log-format.js';
import { Metrics } from './observability/metrics.js';
import { openAdapters, prepareDataDir } from './wiring/adapters.js';
import { listen, openHttpServer } from './wiring/http-server.js';
import { openMetricsServer } from './wiring/metrics-wiring.js';
import { Lifecycle } from './wiring/lifecycle.js';
import { openTracing } from './wiring/tracing-wiring.js';
import { ProcessParts, readConfiguredJobs, reserveConfiguredJobs } from './wiring/parts.js';
import { openApiExposure } from './wiring/exposure.js';
import { readinessReport } from './wiring/readiness.js';
import { type Role, resolveRoles } from './wiring/roles.js';
import { wireWorkers } from './wiring/workers.js';

export { ALL_ROLES, type Role } from './wiring/roles.js';

export interface ServiceOptions {
  readonly config: Config;
  /**
   * What this process runs. Default: everything on the embedded message log; only the API when
   * the message log is Kafka (relay and processors then run as their own processes).
   */
  readonly roles?: readonly Role[];
  readonly clock?: Clock;
  readonly logger?: Logger;
  readonly limits?: UploadLimits;
  /** An event store to use instead of the configured one (embedding, tests). */
  readonly eventStore?: EventStore;
  /** Where the one-time API key announcement goes. */
  readonly announce?: (line: string) => void;
  /** A fleet to use instead of the configured one (embedding, tests). */
  readonly fleet?: Fleet;
}

export interface RunningService {
  readonly url: string;
  /** The API's bearer token ('' in a process without the API). */
  readonly apiKey: string;
  readonly roles: readonly Role[];
  readonly app: FastifyInstance;
  readonly eventStore: EventStore;
  readonly blobStore: BlobStore;
  readonly messageLog: MessageLog;
  readonly readModels: Database.Database | undefined;
  readonly projector: Projector | undefined;
  readonly fleet: Fleet | undefined;
  /** This process's metrics registry. */
  readonly metrics: Metrics;
  /** Where /metrics is served: METRICS_PORT's server, or the main one. */
  readonly metricsUrl: string;
  readonly relay: EventRelay | undefined;
  /** The file expiry sweeper, in a process with the API. */
  readonly sweeper: FileExpirySweeper | undefined;
  /** The blob debris sweeper, in a process with the API. */
  readonly debrisSweeper: BlobDebrisSweeper | undefined;
  /** What a stop under way still waits for, in words (empty when nothing). */
  waitingFor(): string[];
  close(): Promise<void>;
}

/** Wires the configured adapters for the given roles (src/wiring) and starts them. */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const { config } = options;
  const roles = resolveRoles(config, options.roles);
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger({ level: config.logLevel, format: config.logFormat });
  prepareDataDir(config.dataDir);
  const apiKey = roles.has('api') ? resolveApiKey(config.apiKey, config.dataDir, options.announce ?? ((line) => process.stderr.write(`${line}\n`))) : '';
  const configuredJobs = roles.has('api') ? readConfiguredJobs(config) : [];
  const lifecycle = new Lifecycle();
  const metrics = new Metrics();
  try {
    const tracing = await openTracing(config, roles, lifecycle, logger);
    const adapters = await openAdapters({ config, logger, lifecycle, eventStore: options.eventStore, metrics });
    const parts = new ProcessParts({ config, clock, logger, adapters, lifecycle, fleet: options.fleet, metrics, servesApi: roles.has('api') });
    const workers = await wireWorkers(roles, { config, clock, logger, adapters, parts, lifecycle, metrics, tracing });
    const exposure = openApiExposure(config, roles);
    const readiness = readinessReport({ roles, logger, adapters, parts, workers, storage: adapters.storage, ...(exposure ? { warnings: [exposure] } : {}) });
    const app = await openHttpServer(roles, { config, clock, logger, apiKey, limits: options.limits ?? config.uploadLimits, parts, lifecycle, readiness, metrics, tracing });
    const { application, fleet } = parts.opened;

    // The HTTP server listens first, so /live and /ready answer while the read models catch up.
    const url = await listen(app, config);
    if (exposure) logger.warn({ host: config.host, accounts: config.accounts }, exposure);
    const metricsUrl = config.metricsPort === undefined ? url : await openMetricsServer(metrics, config, config.metricsPort, lifecycle);
    await application?.projector.start();
    if (application && roles.has('api')) await reserveConfiguredJobs(config, configuredJobs, application.jobs, adapters.eventStore, logger, fleet?.fleet.models());
    workers.startSweepers();
    fleet?.startHealthChecks();
    // The processors act on the read models: they start once those hold the whole log, and the
    // built-in replicas go back to the weights of the last reload (/ready says 503 until then).
    void (application?.projector.whenCaughtUp() ?? Promise.resolve()).then(async () => {
      if (lifecycle.stopping) return;
      await fleet?.servedWeights.follow();
      await workers.startMessaging();
    });
    const { eventStore, blobStore, messageLog } = adapters;
    const { relay, sweeper, debrisSweeper } = workers;
    const [readModels, projector] = [application?.readModels, application?.projector];
    return { url, apiKey, roles: [...roles], app, eventStore, blobStore, messageLog, readModels, projector, fleet: fleet?.fleet, metrics, metricsUrl: `${metricsUrl}/metrics`, relay, sweeper, debrisSweeper, waitingFor: () => lifecycle.waitingFor(), close: () => lifecycle.stop() };
  } catch (error) {
    await lifecycle.stop().catch(() => undefined);
    throw error;
  }
}
