import { accessSync, constants } from 'node:fs';
import { dirname, join } from 'node:path';
import type Database from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import { type Logger, pino } from 'pino';
import { BatchDeadlineWatch } from '../processors/batch-deadline-watch.js';
import { BatchExpiryWatch } from '../processors/batch-expiry-watch.js';
import { BatchFinalizer } from '../processors/batch-finalizer.js';
import { BatchRunner } from '../processors/batch-runner.js';
import { BatchValidator } from '../processors/batch-validator.js';
import { BlobDebrisSweeper } from '../processors/blob-debris-sweeper.js';
import { EventRelay, MemoryRelayCheckpoint, SqliteRelayCheckpoint } from '../processors/event-relay.js';
import { FileExpirySweeper } from '../processors/file-expiry-sweeper.js';
import { WeightSyncer } from '../processors/weight-syncer.js';
import { WorkConsumer } from '../processors/work-consumer.js';
import { ALL_PROJECTIONS } from '../projections/all-projections.js';
import { BatchesQueries } from '../projections/batches-projection.js';
import { JobsQueries } from '../projections/jobs-projection.js';
import { FilesQueries } from '../projections/files-projection.js';
import { HistoryQueries } from '../projections/history-projection.js';
import { Projector } from '../projections/projector.js';
import { openReadModelStore } from '../projections/read-model-store.js';
import { WeightsQueries } from '../projections/weights-projection.js';
import { resolveApiKey } from './api-key.js';
import { makePrivateDirectory } from './private-files.js';
import { BatchLifecycle } from './application/batch-lifecycle.js';
import { BlobReferences } from './application/blob-references.js';
import { FileRegistry } from './application/file-registry.js';
import { DEMO_JOB, readJobDefinitions } from './application/job-definitions-file.js';
import type { JobDefinition } from './domain/job.js';
import { JobRegistry } from './application/job-registry.js';
import { LineOutcomeLog } from './application/line-outcomes.js';
import { WeightSync } from './application/weight-sync.js';
import type { BlobStore } from './blob-store/blob-store.js';
import { LocalBlobStore } from './blob-store/local-blob-store.js';
import { type Clock, systemClock } from './clock.js';
import { type Config, ConfigError } from './config.js';
import { DEFAULT_UPLOAD_LIMITS, type UploadLimits } from './domain/file.js';
import type { EngineDirectory } from './engine/engine.js';
import type { Fleet } from './engine/fleet.js';
import { openFleet } from './engine/fleet-config.js';
import { EventSchemas, SchemaCheckedEventStore } from './event-store/event-schemas.js';
import type { EventStore } from './event-store/event-store.js';
import { SqliteEventStore } from './event-store/sqlite-event-store.js';
import { SERVICE_VERSION, buildHealthApp, buildHttpApp } from './http/app.js';
import type { ReadinessReport } from './http/routes/system.js';
import { EmbeddedMessageLog } from './message-log/embedded-message-log.js';
import type { MessageLog } from './message-log/message-log.js';
import { MessageSchemas, PROCESSOR_KINDS, type ProcessorKind, WORK_TOPICS, type WorkMessage, spoolTopics } from './message-log/topics.js';
import { ExitCode, StartupFailure, oneLine } from './startup-failure.js';
import { type StartupDeadline, reachBeforeDeadline } from './startup-retry.js';

/** What one process does: the HTTP API, the relay, or one processor kind (or several of them). */
export type Role = 'api' | 'relay' | ProcessorKind;
export const ALL_ROLES: readonly Role[] = ['api', 'relay', ...PROCESSOR_KINDS];

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
  /** How often processors look at the clock for batches past expires_at. */
  readonly expiryCheckMs?: number;
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
  readonly relay: EventRelay | undefined;
  /** The file expiry sweeper, in a process with the API. */
  readonly sweeper: FileExpirySweeper | undefined;
  /** The blob debris sweeper, in a process with the API. */
  readonly debrisSweeper: BlobDebrisSweeper | undefined;
  /** What a stop under way still waits for, in words (empty when nothing). */
  waitingFor(): string[];
  close(): Promise<void>;
}

// The production adapters load only when configured: their clients (gRPC, the AWS SDK, kafkajs)
// would otherwise weigh on every embedded process.
export async function openEventStore(config: Config): Promise<EventStore> {
  let inner: EventStore;
  if (config.eventStoreUrl) {
    const { EventStoreDbEventStore } = await import('./event-store/eventstoredb-event-store.js');
    inner = new EventStoreDbEventStore(config.eventStoreUrl);
  } else {
    makePrivateDirectory(dirname(config.eventsFile));
    inner = new SqliteEventStore(config.eventsFile);
  }
  return new SchemaCheckedEventStore(inner, new EventSchemas());
}

export async function openBlobStore(config: Config): Promise<BlobStore> {
  if (!config.blobStore) return new LocalBlobStore(config.blobsDir);
  const { S3BlobStore, createS3Client } = await import('./blob-store/s3-blob-store.js');
  return new S3BlobStore(createS3Client(config.s3), config.blobStore);
}

export async function openMessageLog(config: Config, logger: Logger): Promise<MessageLog> {
  if (!config.kafka) return new EmbeddedMessageLog();
  const { KafkaMessageLog } = await import('./message-log/kafka-message-log.js');
  return new KafkaMessageLog({ brokers: config.kafka.brokers, clientId: config.kafka.clientId, sessionTimeoutMs: config.kafka.sessionTimeoutMs }, logger.child({ component: 'kafka' }));
}

const FLEET_ROLES: readonly Role[] = ['api', 'validator', 'inference', 'checkpoint'];

/** Wires the configured adapters for the given roles and starts them. */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const { config } = options;
  const roles = new Set<Role>(options.roles ?? (config.kafka ? ['api'] : ALL_ROLES));
  if (!config.kafka && ALL_ROLES.some((role) => !roles.has(role))) {
    throw new ConfigError(['KAFKA_BROKERS must be set to run the API, the relay or a processor in a process of its own: the embedded message log lives inside one process']);
  }
  const has = (role: Role) => roles.has(role);
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? pino({ level: config.logLevel });
  const deadline: StartupDeadline = { at: Date.now() + config.startupTimeoutSeconds * 1000, setting: `STARTUP_TIMEOUT_SECONDS=${config.startupTimeoutSeconds}` };
  prepareDataDir(config.dataDir);
  const apiKey = has('api') ? resolveApiKey(config.apiKey, config.dataDir, options.announce ?? ((line) => process.stderr.write(`${line}\n`))) : '';
  // Read before anything is opened: a missing or malformed file is a configuration mistake.
  const jobDefinitions = has('api') && config.jobsFile ? asConfigurationFailure(() => readJobDefinitions(config.jobsFile!)) : [];

  const eventStore = options.eventStore ?? (await openEventStore(config));
  if (config.eventStoreUrl && !options.eventStore) {
    await reachBeforeDeadline(() => eventStore.headPosition(), { dependency: 'event store', variable: 'EVENTSTORE_URL', deadline, logger });
  }
  const blobStore = await openBlobStore(config);
  const messageLog = await openMessageLog(config, logger);
  const topics = config.kafka ? spoolTopics(config.kafka.partitions) : spoolTopics(4, config.batchParallelChunks);
  if (config.kafka) {
    await reachBeforeDeadline(() => messageLog.ensureTopics(topics), { dependency: 'Kafka cluster', variable: `KAFKA_BROKERS (${config.kafka.brokers.join(',')})`, deadline, logger }).catch(
      async (error: unknown) => {
        await messageLog.close().catch(() => undefined);
        throw error;
      },
    );
  }
  const schemas = new MessageSchemas();
  const needsReadModels = [...roles].some((role) => role !== 'relay');
  const readModels = needsReadModels ? inDataDir(config.dataDir, () => openReadModelStore(join(config.dataDir, 'read-models.sqlite'))) : undefined;
  const projector = readModels
    ? new Projector(eventStore, readModels, ALL_PROJECTIONS, logger.child({ component: 'projector' }))
    : undefined;
  const fleet = FLEET_ROLES.some(has) ? (options.fleet ?? (await asConfigurationFailure(() => openFleet(config, logger.child({ component: 'images' }))))) : undefined;

  // Everything below reads or waits for the read models: absent only in a relay-only process.
  const parts = readModels && projector ? wireParts({ config, clock, logger, eventStore, blobStore, readModels, projector, fleet }) : undefined;

  const consumers: WorkConsumer[] = [];
  const work: Record<ProcessorKind, ((message: WorkMessage) => Promise<void>) | undefined> = {
    // The read models hold at least the message's event: a batch they show past validating is
    // left alone without reading its stream (the embedded relay republishes the whole log at start).
    validator:
      parts &&
      ((message) => (message.kind === 'validate-batch' && parts.batchesQueries.get(message.batch_id)?.status === 'validating' ? parts.validator.validate(message.batch_id) : Promise.resolve())),
    inference: parts && ((message) => (message.kind === 'run-chunk' ? parts.runner.run(message.batch_id, message.chunk) : Promise.resolve())),
    finalizer: parts && ((message) => (message.kind === 'finalize-batch' ? parts.finalizer.finalize(message.batch_id) : Promise.resolve())),
    checkpoint: parts?.weightSyncer && ((message) => (message.kind === 'sync-weights' ? parts.weightSyncer!.step(message.model) : Promise.resolve())),
  };
  // Every inference partition is held at once: the batch runner, not the order of messages,
  // chooses which chunks run (BATCH_PARALLEL_CHUNKS of them, by deadline).
  const inferencePartitions = topics.find((topic) => topic.topic === WORK_TOPICS.inference)!.partitions;
  const concurrency: Record<ProcessorKind, number> = { validator: 2, inference: inferencePartitions, finalizer: 2, checkpoint: 2 };
  for (const kind of PROCESSOR_KINDS) {
    const handle = work[kind];
    if (!has(kind) || !handle || !projector) continue;
    consumers.push(new WorkConsumer({ kind, messageLog, schemas, eventStore, projector, concurrency: concurrency[kind], log: logger.child({ component: `${kind}-processor` }), handle }));
  }
  const relay = has('relay')
    ? new EventRelay({
        eventStore,
        messageLog,
        schemas,
        // The embedded log starts empty at every start, so the relay starts from the beginning too.
        checkpoint: config.kafka ? new SqliteRelayCheckpoint(join(config.dataDir, 'relay.sqlite')) : new MemoryRelayCheckpoint(),
        log: logger.child({ component: 'relay' }),
      })
    : undefined;
  const expiryWatch =
    has('finalizer') && parts
      ? new BatchExpiryWatch({ queries: parts.batchesQueries, batches: parts.batches, clock, log: logger.child({ component: 'batch-expiry' }), intervalMs: options.expiryCheckMs ?? 1000 })
      : undefined;
  const deadlineWatch =
    has('finalizer') && parts
      ? new BatchDeadlineWatch({ queries: parts.batchesQueries, batches: parts.batches, clock, log: logger.child({ component: 'batch-deadline' }), intervalMs: options.expiryCheckMs ?? 1000 })
      : undefined;
  const sweeper =
    has('api') && parts
      ? new FileExpirySweeper({ files: parts.files, queries: parts.filesQueries, clock, log: logger.child({ component: 'file-expiry-sweeper' }) }, config.fileSweepIntervalSeconds * 1000)
      : undefined;
  const debrisSweeper =
    has('api') && parts
      ? new BlobDebrisSweeper(
          { blobStore, references: new BlobReferences({ eventStore, filesQueries: parts.filesQueries }), log: logger.child({ component: 'blob-debris-sweeper' }) },
          { intervalMs: config.blobSweepIntervalSeconds * 1000, graceMs: config.blobDebrisGraceSeconds * 1000 },
        )
      : undefined;

  let messagingStarted = false;
  let lastReported = '';
  const readiness = (): ReadinessReport => {
    const projections = projector?.status();
    // Kinds only: paths, bucket names and broker addresses stay in the logs, away from anonymous callers.
    const details = {
      version: SERVICE_VERSION,
      roles: [...roles],
      event_store: config.eventStoreUrl ? 'eventstoredb' : 'embedded',
      blob_store: config.blobStore ? 's3' : 'local',
      message_log: config.kafka ? 'kafka' : 'embedded',
      projections: { position: projections?.position ?? null },
      ...(consumers.length > 0 ? { processors: Object.fromEntries(consumers.map((consumer) => [consumer.kind, { handled: consumer.handled }])) } : {}),
      ...(relay ? { relay: { relayed: relay.relayed } } : {}),
    };
    // Not ready: this process cannot do its job. Degraded: it serves, but some of the work it
    // accepts waits (a process with the API still takes files and batches while the relay or the
    // processors are away, or while a model has no healthy replica).
    const notReady: string[] = [];
    const degraded: string[] = [];
    const messaging = has('api') ? degraded : notReady;
    if (projections?.failed) notReady.push('projections failed');
    else if (projections && !projections.caughtUp) notReady.push('projections are catching up');
    if (!messagingStarted && (relay || consumers.length > 0)) messaging.push('joining the message log');
    if (relay?.failure) messaging.push('relay: publishing to the message log is failing');
    for (const model of fleet?.modelsWithoutHealthyReplica() ?? []) degraded.push(`model ${model}: no healthy replica`);
    const internal = [projections?.failed && `projections: ${projections.failed}`, relay?.failure && `relay: ${relay.failure}`].filter(Boolean);
    const report = JSON.stringify({ notReady, degraded, internal });
    if (report !== lastReported && (notReady.length > 0 || degraded.length > 0 || lastReported !== '')) {
      lastReported = report;
      logger.warn({ not_ready: notReady, degraded, causes: internal }, notReady.length > 0 ? 'not ready' : degraded.length > 0 ? 'serving degraded' : 'ready again');
    }
    if (notReady.length > 0) return { ready: false, reasons: notReady, degraded, details };
    return { ready: true, reasons: [], degraded, details };
  };

  const app =
    has('api') && parts && fleet
      ? await buildHttpApp({
          logger,
          apiKey,
          files: parts.files,
          filesQueries: parts.filesQueries,
          jobs: parts.jobs,
          batches: parts.batches,
          batchesQueries: parts.batchesQueries,
          jobsQueries: parts.jobsQueries,
          history: parts.history,
          fleet,
          weightSync: parts.weightSync,
          weightsQueries: parts.weightsQueries,
          clock,
          limits: options.limits ?? DEFAULT_UPLOAD_LIMITS,
          readiness,
          timeouts: config.http,
        })
      : await buildHealthApp({ logger, readiness, timeouts: config.http });

  // Requests being answered, for a stop that says what it waits for.
  let requestsInFlight = 0;
  app.server.on('request', (_request, response) => {
    requestsInFlight++;
    response.once('close', () => requestsInFlight--);
  });

  let closed = false;
  let closingStep = '';
  const waitingFor = (): string[] => {
    if (!closed) return [];
    const waits: string[] = [];
    if (requestsInFlight > 0) waits.push(`${requestsInFlight} HTTP request${requestsInFlight === 1 ? '' : 's'} in flight`);
    const chunks = parts?.runner.runningChunks ?? 0;
    if (chunks > 0) waits.push(`${chunks} batch chunk${chunks === 1 ? '' : 's'} finishing the requests already sent`);
    if (closingStep) waits.push(closingStep);
    return waits;
  };
  const step = async (what: string, action: () => Promise<unknown> | unknown) => {
    closingStep = what;
    await action();
  };
  const close = async () => {
    if (closed) return;
    closed = true;
    // No new line of batch work goes out; lines already sent are waited for and recorded.
    parts?.runner.stop();
    // In-flight requests finish; keep-alive connections are closed as soon as they fall idle,
    // including those whose last response was still being written when closing began.
    const idleSweep = setInterval(() => app.server.closeIdleConnections(), 100);
    await step('the HTTP server', () => app.close().finally(() => clearInterval(idleSweep)));
    await step('the relay', () => relay?.stop());
    await step('the processors', () => Promise.all(consumers.map((consumer) => consumer.stop().catch((error: unknown) => logger.warn({ err: error }, 'consumer did not stop cleanly')))));
    await step('the batch expiry watch', () => expiryWatch?.stop());
    await step('the batch deadline watch', () => deadlineWatch?.stop());
    await step('the weight syncer', () => parts?.weightSyncer?.stop());
    await step('the batch runner', () => parts?.runner.idle());
    fleet?.stop();
    await step('the file expiry sweeper', () => sweeper?.stop());
    await step('the blob debris sweeper', () => debrisSweeper?.stop());
    await step('the projector', () => projector?.stop());
    await step('the message log', () => messageLog.close().catch((error: unknown) => logger.warn({ err: error }, 'message log did not close cleanly')));
    await step('the event store', () => eventStore.close());
    readModels?.close();
    closingStep = '';
  };

  const startMessaging = async () => {
    // Kafka's topics were made before the start went on; the embedded log's cannot fail.
    if (!config.kafka) await retryUntil(() => messageLog.ensureTopics(topics), () => closed, logger, 'creating the topics');
    for (const consumer of consumers) await retryUntil(() => consumer.start(), () => closed, logger, 'joining a consumer group');
    if (closed) return;
    relay?.start();
    expiryWatch?.start();
    deadlineWatch?.start();
    messagingStarted = true;
  };

  try {
    await listen(app, config);
    await projector?.start();
    if (has('api') && parts) await reserveConfiguredJobs(config, jobDefinitions, parts.jobs, logger);
    sweeper?.start();
    debrisSweeper?.start();
    fleet?.startHealthChecks(config.engine.cooldownMs || 5000);
    const caughtUp = projector ? projector.whenCaughtUp() : Promise.resolve();
    // The processors act on the read models: they start once those hold the whole log, and the
    // built-in replicas go back to the weights of the last reload (/ready says 503 until then).
    void caughtUp.then(async () => {
      if (closed) return;
      if (parts?.weightSyncer) {
        const restore = async () => {
          try {
            await parts.weightSyncer!.restoreServedWeights();
          } catch (error) {
            logger.error({ err: error }, 'could not load the last reloaded weights; serving the checkpoints as they were');
          }
        };
        await restore();
        // A reload completed by the checkpoint processor, here or in another process.
        projector?.onApplied((events) => {
          if (events.some((event) => event.type === 'WeightsReloaded')) void restore();
        });
      }
      await startMessaging();
    });
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  return { url, apiKey, roles: [...roles], app, eventStore, blobStore, messageLog, readModels, projector, fleet, relay, sweeper, debrisSweeper, waitingFor, close };
}

/** The application services and processors that work on the read models. */
function wireParts(deps: {
  config: Config;
  clock: Clock;
  logger: Logger;
  eventStore: EventStore;
  blobStore: BlobStore;
  readModels: Database.Database;
  projector: Projector;
  fleet: Fleet | undefined;
}) {
  const { config, clock, logger, eventStore, blobStore, readModels, projector, fleet } = deps;
  const filesQueries = new FilesQueries(readModels);
  const batchesQueries = new BatchesQueries(readModels, projector);
  const jobsQueries = new JobsQueries(readModels);
  const weightsQueries = new WeightsQueries(readModels);
  const files = new FileRegistry({ eventStore, blobStore, projector, clock, log: logger });
  const jobs = new JobRegistry({ eventStore, projector, clock, log: logger });
  const batches = new BatchLifecycle({ eventStore, projector, jobs, clock, log: logger });
  const outcomes = new LineOutcomeLog(eventStore);
  const history = new HistoryQueries(readModels, eventStore);
  const engines = fleet ?? noEngines;
  const validator = new BatchValidator({ eventStore, blobStore, batches, engines, clock, log: logger.child({ component: 'batch-validator' }), chunkLines: config.batchChunkLines });
  const runner = new BatchRunner({ blobStore, batches, queries: batchesQueries, outcomes, engines, clock, log: logger.child({ component: 'batch-runner' }), parallelChunks: config.batchParallelChunks });
  const finalizer = new BatchFinalizer({ batches, queries: batchesQueries, outcomes, files, clock, log: logger.child({ component: 'batch-finalizer' }) });
  const weightSync = new WeightSync({ eventStore, projector, clock, log: logger });
  const weightSyncer = fleet
    ? new WeightSyncer({
        weightSync,
        queries: weightsQueries,
        fleet,
        clock,
        log: logger.child({ component: 'weight-syncer' }),
        stagingDir: join(config.dataDir, 'staging'),
        openSource: async () => {
          const [{ S3CheckpointSource }, { createS3Client }] = await Promise.all([import('./engine/checkpoint-source.js'), import('./blob-store/s3-blob-store.js')]);
          return new S3CheckpointSource(createS3Client(config.s3));
        },
        retryDelayMs: config.weightSyncRetryMs,
      })
    : undefined;
  return { filesQueries, batchesQueries, jobsQueries, weightsQueries, files, jobs, batches, history, validator, runner, finalizer, weightSync, weightSyncer };
}

const noEngines: EngineDirectory = { engineFor: () => undefined };

/** Tries a start-up step until it succeeds (a broker may still be starting) or the process stops. */
async function retryUntil(step: () => Promise<void>, stopped: () => boolean, logger: Logger, what: string): Promise<void> {
  let delay = 500;
  for (;;) {
    if (stopped()) return;
    try {
      await step();
      return;
    } catch (error) {
      logger.warn({ err: error, retry_in_ms: delay }, `${what} failed; trying again`);
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  }
}

/** JOBS_FILE's jobs, and on the embedded default the demo job of the quick start. */
async function reserveConfiguredJobs(config: Config, definitions: readonly JobDefinition[], jobs: JobRegistry, logger: Logger): Promise<void> {
  for (const job of definitions) {
    const reserved = await jobs.reserve(job, { correlationId: 'jobs-file' });
    if (E.isLeft(reserved)) throw new StartupFailure(`JOBS_FILE ${config.jobsFile}, job ${job.job_id}: ${reserved.left.message}`, ExitCode.config);
  }
  if (!config.eventStoreUrl && !definitions.some((job) => job.job_id === DEMO_JOB.job_id)) {
    const reserved = await jobs.reserve(DEMO_JOB, { correlationId: 'demo-job' });
    if (E.isLeft(reserved)) logger.warn({ reason: reserved.left.message }, 'demo job not reserved');
  }
}

/** DATA_DIR exists and is writable, or the start stops naming it. */
function prepareDataDir(dataDir: string): void {
  inDataDir(dataDir, () => {
    makePrivateDirectory(dataDir);
    accessSync(dataDir, constants.W_OK);
  });
}

/** Runs a step that writes under DATA_DIR; a file-system refusal becomes a failure naming DATA_DIR. */
function inDataDir<T>(dataDir: string, action: () => T): T {
  try {
    return action();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && /^E(ACCES|PERM|NOTDIR|ROFS|NOSPC|EXIST|DQUOT|ISDIR)$/.test(code)) {
      throw new StartupFailure(`DATA_DIR ${dataDir} cannot be created or written: ${oneLine(error)}`, ExitCode.cannotCreate, { cause: error });
    }
    throw error;
  }
}

/** A step that reads a configured file (JOBS_FILE, FLEET_FILE): its failure is a configuration mistake. */
function asConfigurationFailure<T>(action: () => T): T {
  const fail = (error: unknown): never => {
    if (error instanceof StartupFailure) throw error;
    throw new StartupFailure(oneLine(error), ExitCode.config, { cause: error });
  };
  try {
    const result = action();
    return (result instanceof Promise ? result.catch(fail) : result) as T;
  } catch (error) {
    return fail(error);
  }
}

/** Listens on HOST:PORT; a host or port that cannot be had is a configuration mistake named as such. */
async function listen(app: FastifyInstance, config: Config): Promise<void> {
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
}
