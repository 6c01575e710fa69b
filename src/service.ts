import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';
import { type Logger, pino } from 'pino';
import { FileExpirySweeper } from '../processors/file-expiry-sweeper.js';
import { FilesQueries, filesProjection } from '../projections/files-projection.js';
import { Projector } from '../projections/projector.js';
import { openReadModelStore } from '../projections/read-model-store.js';
import { resolveApiKey } from './api-key.js';
import { FileRegistry } from './application/file-registry.js';
import type { BlobStore } from './blob-store/blob-store.js';
import { LocalBlobStore } from './blob-store/local-blob-store.js';
import { type Clock, systemClock } from './clock.js';
import type { Config } from './config.js';
import { DEFAULT_UPLOAD_LIMITS, type UploadLimits } from './domain/file.js';
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
  const projector = new Projector(eventStore, readModels, [filesProjection], logger.child({ component: 'projector' }));
  const filesQueries = new FilesQueries(readModels);
  const files = new FileRegistry({ eventStore, blobStore, projector, clock, log: logger });
  const sweeper = new FileExpirySweeper(
    { files, queries: filesQueries, clock, log: logger.child({ component: 'file-expiry-sweeper' }) },
    config.fileSweepIntervalSeconds * 1000,
  );

  const app = await buildHttpApp({
    logger,
    apiKey,
    files,
    filesQueries,
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
    await sweeper.stop();
    await projector.stop();
    await eventStore.close();
    readModels.close();
  };

  try {
    await app.listen({ port: config.port, host: config.host });
    await projector.start();
    sweeper.start();
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  return { url, apiKey, app, eventStore, blobStore, readModels, projector, sweeper, close };
}
