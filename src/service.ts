import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';
import { type Logger, pino } from 'pino';
import { BatchFinalizer } from '../processors/batch-finalizer.js';
import { BatchPipeline } from '../processors/batch-pipeline.js';
import { BatchRunner } from '../processors/batch-runner.js';
import { BatchValidator } from '../processors/batch-validator.js';
import { FileExpirySweeper } from '../processors/file-expiry-sweeper.js';
import { BatchesQueries, batchesProjection, jobsProjection } from '../projections/batches-projection.js';
import { FilesQueries, filesProjection } from '../projections/files-projection.js';
import { WeightsQueries, weightsProjection } from '../projections/weights-projection.js';
import { WeightSyncer } from '../processors/weight-syncer.js';
import { Projector } from '../projections/projector.js';
import { openReadModelStore } from '../projections/read-model-store.js';
import { resolveApiKey } from './api-key.js';
import * as E from 'fp-ts/lib/Either.js';
import { BatchLifecycle } from './application/batch-lifecycle.js';
import { FileRegistry } from './application/file-registry.js';
import { DEMO_JOB, readJobDefinitions } from './application/job-definitions-file.js';
import { JobRegistry } from './application/job-registry.js';
import { LineOutcomeLog } from './application/line-outcomes.js';
import type { BlobStore } from './blob-store/blob-store.js';
import { LocalBlobStore } from './blob-store/local-blob-store.js';
import { type Clock, systemClock } from './clock.js';
import type { Config } from './config.js';
import { DEFAULT_UPLOAD_LIMITS, type UploadLimits } from './domain/file.js';
import type { Fleet } from './engine/fleet.js';
import { openFleet } from './engine/fleet-config.js';
import { EventSchemas, SchemaCheckedEventStore } from './event-store/event-schemas.js';
import type { EventStore } from './event-store/event-store.js';
import { SqliteEventStore } from './event-store/sqlite-event-store.js';
import { SERVICE_VERSION, buildHttpApp } from './http/app.js';

export interface ServiceOptions {
  readonly config: Config;
  readonly clock?: Clock;
  readonly logger?: Logger;
  readonly limits?: UploadLimits;
  /** An event store to use instead of the configured one (embedding, tests). */
  readonly eventStore?: EventStore;
  /** Where the one-time API key announcement goes. */
  readonly announce?: (line: string) => void;
  /** A fleet to use instead of the configured one (embedding, tests). */
  readonly fleet?: Fleet;
  /** How often the batch pipeline looks for work besides reacting to events. */
  readonly pipelineTickMs?: number;
}

export interface RunningService {
  readonly url: string;
  readonly apiKey: string;
  readonly app: FastifyInstance;
  readonly eventStore: EventStore;
  readonly blobStore: BlobStore;
  readonly readModels: Database.Database;
  readonly projector: Projector;
  readonly sweeper: FileExpirySweeper;
  readonly pipeline: BatchPipeline;
  readonly fleet: Fleet;
  readonly weightSyncer: WeightSyncer;
  close(): Promise<void>;
}

// The production adapters load only when configured: their clients (gRPC, the AWS SDK) would
// otherwise weigh on every embedded process.
export async function openEventStore(config: Config): Promise<EventStore> {
  let inner: EventStore;
  if (config.eventStoreUrl) {
    const { EventStoreDbEventStore } = await import('./event-store/eventstoredb-event-store.js');
    inner = new EventStoreDbEventStore(config.eventStoreUrl);
  } else {
    inner = new SqliteEventStore(join(config.dataDir, 'events.sqlite'));
  }
  return new SchemaCheckedEventStore(inner, new EventSchemas());
}

export async function openBlobStore(config: Config): Promise<BlobStore> {
  if (!config.blobStore) return new LocalBlobStore(join(config.dataDir, 'blobs'));
  const { S3BlobStore, createS3Client } = await import('./blob-store/s3-blob-store.js');
  return new S3BlobStore(createS3Client(config.s3), config.blobStore);
}

/** Wires the whole service on the configured adapters and starts serving. */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? pino({ level: config.logLevel });
  mkdirSync(config.dataDir, { recursive: true });
  const apiKey = resolveApiKey(config.apiKey, config.dataDir, options.announce ?? ((line) => process.stderr.write(`${line}\n`)));

  const eventStore = options.eventStore ?? (await openEventStore(config));
  const blobStore = await openBlobStore(config);
  const readModels = openReadModelStore(join(config.dataDir, 'read-models.sqlite'));
  const projector = new Projector(
    eventStore,
    readModels,
    [filesProjection, jobsProjection, batchesProjection, weightsProjection],
    logger.child({ component: 'projector' }),
  );
  const filesQueries = new FilesQueries(readModels);
  const batchesQueries = new BatchesQueries(readModels);
  const files = new FileRegistry({ eventStore, blobStore, projector, clock, log: logger });
  const jobs = new JobRegistry({ eventStore, projector, clock, log: logger });
  const batches = new BatchLifecycle({ eventStore, projector, jobs, clock, log: logger });
  const outcomes = new LineOutcomeLog(eventStore);
  const fleet = options.fleet ?? (await openFleet(config));
  const sweeper = new FileExpirySweeper(
    { files, queries: filesQueries, clock, log: logger.child({ component: 'file-expiry-sweeper' }) },
    config.fileSweepIntervalSeconds * 1000,
  );
  const pipeline = new BatchPipeline({
    queries: batchesQueries,
    batches,
    validator: new BatchValidator({ eventStore, blobStore, batches, engines: fleet, clock, log: logger.child({ component: 'batch-validator' }), chunkLines: config.batchChunkLines }),
    runner: new BatchRunner({
      blobStore,
      batches,
      queries: batchesQueries,
      outcomes,
      engines: fleet,
      clock,
      log: logger.child({ component: 'batch-runner' }),
      parallelChunks: config.batchParallelChunks,
    }),
    finalizer: new BatchFinalizer({ batches, queries: batchesQueries, outcomes, files, clock, log: logger.child({ component: 'batch-finalizer' }) }),
    clock,
    log: logger.child({ component: 'batch-pipeline' }),
    tickMs: options.pipelineTickMs ?? 1000,
  });
  projector.onApplied(() => pipeline.kick());
  const weightsQueries = new WeightsQueries(readModels);
  const weightSyncer = new WeightSyncer({
    eventStore,
    projector,
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
  });

  const app = await buildHttpApp({
    logger,
    apiKey,
    files,
    filesQueries,
    jobs,
    batches,
    batchesQueries,
    fleet,
    weightSyncer,
    weightsQueries,
    clock,
    limits: options.limits ?? DEFAULT_UPLOAD_LIMITS,
    readiness: () => {
      const projections = projector.status();
      return {
        ready: projections.caughtUp,
        ...(projections.failed ? { reason: `projections failed: ${projections.failed}` } : projections.caughtUp ? {} : { reason: 'projections are catching up' }),
        details: {
          version: SERVICE_VERSION,
          event_store: config.eventStoreUrl ? 'eventstoredb' : 'embedded',
          blob_store: blobStore.description,
          projections: { position: projections.position ?? null },
        },
      };
    },
  });

  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    // In-flight requests finish; keep-alive connections are closed as soon as they fall idle,
    // including those whose last response was still being written when closing began.
    const idleSweep = setInterval(() => app.server.closeIdleConnections(), 100);
    await app.close().finally(() => clearInterval(idleSweep));
    await pipeline.stop();
    await weightSyncer.stop();
    fleet.stop();
    await sweeper.stop();
    await projector.stop();
    await eventStore.close();
    readModels.close();
  };

  try {
    await app.listen({ port: config.port, host: config.host });
    await projector.start();
    await reserveConfiguredJobs(config, jobs, logger);
    sweeper.start();
    fleet.startHealthChecks(config.engine.cooldownMs || 5000);
    // The processors act on the read models: they start once those hold the whole log, and the
    // built-in replicas go back to the weights of the last reload (/ready says 503 until then).
    void projector.whenCaughtUp().then(() => {
      if (closed) return;
      try {
        weightSyncer.restoreServedWeights();
      } catch (error) {
        logger.error({ err: error }, 'could not restore the last reloaded weights; serving the configured checkpoints');
      }
      pipeline.start();
      weightSyncer.start();
    });
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  return { url, apiKey, app, eventStore, blobStore, readModels, projector, sweeper, pipeline, fleet, weightSyncer, close };
}

/** JOBS_FILE's jobs, and on the embedded default the demo job of the quick start. */
async function reserveConfiguredJobs(config: Config, jobs: JobRegistry, logger: Logger): Promise<void> {
  const definitions = config.jobsFile ? readJobDefinitions(config.jobsFile) : [];
  for (const job of definitions) {
    const reserved = await jobs.reserve(job, { correlationId: 'jobs-file' });
    if (E.isLeft(reserved)) throw new Error(`JOBS_FILE: ${reserved.left.message}`);
  }
  if (!config.eventStoreUrl && !definitions.some((job) => job.job_id === DEMO_JOB.job_id)) {
    const reserved = await jobs.reserve(DEMO_JOB, { correlationId: 'demo-job' });
    if (E.isLeft(reserved)) logger.warn({ reason: reserved.left.message }, 'demo job not reserved');
  }
}
