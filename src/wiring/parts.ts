import { join } from 'node:path';
import type Database from 'better-sqlite3';
import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import { ServedWeights } from '../../processors/weights/served-weights.js';
import { AccountsQueries } from '../../projections/accounts-projection.js';
import { projectionsFor } from '../../projections/all-projections.js';
import { OwnedObjects } from '../../projections/owned-objects.js';
import { BatchesQueries } from '../../projections/batches-projection.js';
import { FilesQueries } from '../../projections/files-projection.js';
import { HistoryFeed } from '../../projections/history-feed.js';
import { ChangeFeed } from '../../projections/change-feed.js';
import { HistoryQueries } from '../../projections/history-projection.js';
import { JobsQueries } from '../../projections/jobs-projection.js';
import { Projector } from '../../projections/projector.js';
import { openReadModelStore } from '../../projections/read-model-store.js';
import { WeightsQueries } from '../../projections/weights-projection.js';
import { WebhooksQueries } from '../../projections/webhooks-projection.js';
import { WebhookRegistry } from '../application/webhook-registry.js';
import { AccountRegistry } from '../application/account-registry.js';
import { BatchLifecycle } from '../application/batch-lifecycle.js';
import { FileRegistry } from '../application/file-registry.js';
import { DEMO_JOB, EMBEDDINGS_JOB, readJobDefinitions } from '../application/job-definitions-file.js';
import { JobRegistry } from '../application/job-registry.js';
import { LineOutcomeLog } from '../application/line-outcomes.js';
import { WeightSync } from '../application/weight-sync.js';
import type { Clock } from '../platform/clock.js';
import type { Config } from '../config.js';
import type { JobDefinition } from '../domain/job.js';
import type { Fleet } from '../engine/fleet.js';
import type { EventStore } from '../event-store/event-store.js';
import { openFleet } from '../engine/fleet-config.js';
import { fleetSettings } from './fleet-settings.js';
import { ExitCode, StartupFailure, asConfigurationFailure } from '../process/startup-failure.js';
import type { Adapters } from './adapters.js';
import { inDataDir } from './adapters.js';
import type { Lifecycle } from './lifecycle.js';
import type { Metrics } from '../observability/metrics.js';
import { countLineOutcomes, observeAccounts, observeFleet, observeReadModels } from './metrics-wiring.js';

/** The read models, their queries and the application services: every role but the relay works on them. */
export interface ApplicationParts {
  readonly readModels: Database.Database;
  readonly projector: Projector;
  readonly filesQueries: FilesQueries;
  readonly batchesQueries: BatchesQueries;
  readonly jobsQueries: JobsQueries;
  readonly weightsQueries: WeightsQueries;
  /** The audit trail's index and its feed: kept only in a process that serves the API (projectionsFor). */
  readonly history: HistoryQueries;
  readonly historyFeed: HistoryFeed;
  readonly changeFeed: ChangeFeed;
  readonly files: FileRegistry;
  readonly jobs: JobRegistry;
  readonly batches: BatchLifecycle;
  readonly outcomes: LineOutcomeLog;
  readonly weightSync: WeightSync;
  readonly webhooks: WebhookRegistry;
  readonly webhooksQueries: WebhooksQueries;
  readonly accounts: AccountRegistry;
  readonly accountsQueries: AccountsQueries;
  /** Batches, files and histories as a principal may see them: what the API's routes read. */
  readonly owned: OwnedObjects;
}

/** The engines, for the roles that call them (the API, the validator, inference, the checkpoint processor). */
export interface FleetParts {
  readonly fleet: Fleet;
  /** The weights this process's built-in replicas serve: the last completed reload's, wherever it was completed. */
  readonly servedWeights: ServedWeights;
  /** Health-checks replicas that were left out, so they come back, and reads the load gauges of those that publish them. */
  startHealthChecks(): void;
}

export interface PartsContext {
  readonly config: Config;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly adapters: Adapters;
  readonly lifecycle: Lifecycle;
  /** A fleet to use instead of the configured one (embedding, tests). */
  readonly fleet?: Fleet | undefined;
  readonly metrics: Metrics;
  /** Whether the process serves the API: only then does it keep the history index (projectionsFor). */
  readonly servesApi: boolean;
}

/**
 * The parts a process's roles ask for. Each is wired on its first request and shared after, so a
 * process opens only what its roles use (the relay neither, the finalizer no fleet), and what a
 * role asks for it gets, typed, never maybe.
 */
export class ProcessParts {
  private applicationParts: ApplicationParts | undefined;
  private fleetParts: Promise<FleetParts> | undefined;
  private openedFleet: FleetParts | undefined;

  constructor(private readonly context: PartsContext) {}

  application(): ApplicationParts {
    return (this.applicationParts ??= wireApplication(this.context));
  }

  fleet(): Promise<FleetParts> {
    this.fleetParts ??= wireFleet(this.context, this.application()).then((parts) => (this.openedFleet = parts));
    return this.fleetParts;
  }

  /** What the roles asked for so far: for the readiness report and the running service. */
  get opened(): { readonly application: ApplicationParts | undefined; readonly fleet: FleetParts | undefined } {
    return { application: this.applicationParts, fleet: this.openedFleet };
  }
}

function wireApplication({ config, clock, logger, adapters, lifecycle, metrics, servesApi }: PartsContext): ApplicationParts {
  const { eventStore, blobStore } = adapters;
  const readModels = inDataDir(config.dataDir, () => openReadModelStore(join(config.dataDir, 'read-models.sqlite')));
  lifecycle.opened('the read models', () => readModels.close());
  const projector = new Projector(eventStore, readModels, projectionsFor(servesApi), logger.child({ component: 'projector' }), adapters.storage);
  lifecycle.opened('the projector', () => projector.stop());
  const jobs = new JobRegistry({ eventStore, projector, clock, log: logger });
  const history = new HistoryQueries(readModels, eventStore);
  const batchesQueries = new BatchesQueries(readModels, projector);
  const filesQueries = new FilesQueries(readModels);
  const accountsQueries = new AccountsQueries(readModels);
  observeReadModels(metrics, batchesQueries, projector, eventStore);
  observeAccounts(metrics, accountsQueries);
  return {
    readModels,
    projector,
    filesQueries,
    batchesQueries,
    jobsQueries: new JobsQueries(readModels),
    weightsQueries: new WeightsQueries(readModels),
    history,
    historyFeed: new HistoryFeed(history, projector),
    changeFeed: new ChangeFeed(projector),
    files: new FileRegistry({ eventStore, blobStore, projector, clock, log: logger }),
    jobs,
    batches: new BatchLifecycle({ eventStore, projector, jobs, clock, log: logger }),
    outcomes: new LineOutcomeLog(eventStore, countLineOutcomes(metrics, batchesQueries, clock)),
    weightSync: new WeightSync({ eventStore, projector, clock, log: logger }),
    webhooks: new WebhookRegistry({ eventStore, projector, clock, log: logger }),
    webhooksQueries: new WebhooksQueries(readModels),
    accounts: new AccountRegistry({ eventStore, projector, clock, log: logger }),
    accountsQueries,
    owned: new OwnedObjects({ batches: batchesQueries, files: filesQueries, history }),
  };
}

async function wireFleet(context: PartsContext, application: ApplicationParts): Promise<FleetParts> {
  const { config, logger, lifecycle } = context;
  const fleet = context.fleet ?? (await asConfigurationFailure(() => openFleet(fleetSettings(config), logger)));
  lifecycle.opened('the fleet', () => fleet.stop());
  observeFleet(context.metrics, fleet);
  const servedWeights = new ServedWeights({ queries: application.weightsQueries, projector: application.projector, fleet, log: logger });
  return {
    fleet,
    servedWeights,
    startHealthChecks: () => {
      fleet.startHealthChecks(config.engine.healthCheckIntervalMs);
      fleet.startLoadReadings(config.engine.loadReadingIntervalMs);
    },
  };
}

/** JOBS_FILE's definitions, read before anything is opened: a missing or malformed file is a configuration mistake. */
export function readConfiguredJobs(config: Config): JobDefinition[] {
  const { jobsFile } = config;
  return jobsFile ? asConfigurationFailure(() => readJobDefinitions(jobsFile)) : [];
}

/**
 * JOBS_FILE's jobs, and on the embedded event store the demo job of the quick start and, where
 * this process's fleet serves the built-in embedding model, its job.
 */
export async function reserveConfiguredJobs(config: Config, definitions: readonly JobDefinition[], jobs: JobRegistry, eventStore: Pick<EventStore, 'kind'>, logger: Logger, servedModels: readonly string[] = []): Promise<void> {
  for (const job of definitions) {
    const reserved = await jobs.reserve(job, { correlationId: 'jobs-file' });
    if (E.isLeft(reserved)) throw new StartupFailure(`JOBS_FILE ${config.jobsFile}, job ${job.job_id}: ${reserved.left.message}`, ExitCode.config);
  }
  if (eventStore.kind !== 'embedded') return;
  const defaults = [DEMO_JOB, ...(servedModels.includes(EMBEDDINGS_JOB.model) ? [EMBEDDINGS_JOB] : [])];
  for (const job of defaults) {
    if (definitions.some((defined) => defined.job_id === job.job_id)) continue;
    const reserved = await jobs.reserve(job, { correlationId: job === DEMO_JOB ? 'demo-job' : 'embeddings-job' });
    if (E.isLeft(reserved)) logger.warn({ job: job.job_id, reason: reserved.left.message }, 'default job not reserved');
  }
}
