import { accessSync, constants } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import type { BlobStore } from '../blob-store/blob-store.js';
import { LocalBlobStore } from '../blob-store/local-blob-store.js';
import type { Config } from '../config.js';
import { AppendTimedEventStore, EventSchemas, SchemaCheckedEventStore } from '../event-store/event-schemas.js';
import type { Metrics } from '../observability/metrics.js';
import type { EventStore } from '../event-store/event-store.js';
import { SqliteEventStore } from '../event-store/sqlite-event-store.js';
import { EmbeddedMessageLog } from '../message-log/embedded-message-log.js';
import type { MessageLog, TopicSpec } from '../message-log/message-log.js';
import { spoolTopics } from '../messages/topics.js';
import { makePrivateDirectory } from '../platform/private-files.js';
import { ExitCode, StartupFailure, oneLine } from '../process/startup-failure.js';
import { type StartupDeadline, reachBeforeDeadline } from '../process/startup-retry.js';
import { StorageSpace } from '../platform/storage-space.js';
import { EventStoreReachability } from '../event-store/event-store-reachability.js';
import type { Lifecycle } from './lifecycle.js';
import { observeStorage } from './metrics-wiring.js';
import { SpaceWatchedBlobStore, SpaceWatchedEventStore } from './space-watched-stores.js';

// The production adapters load only when configured: their clients (gRPC, node-postgres, the AWS SDK, kafkajs)
// would otherwise weigh on every embedded process.
export async function openEventStore(config: Config): Promise<EventStore> {
  let inner: EventStore;
  if (config.eventStoreUrl && /^postgres(ql)?:\/\//.test(config.eventStoreUrl)) {
    const { PostgresEventStore } = await import('../event-store/postgres-event-store.js');
    inner = new PostgresEventStore(config.eventStoreUrl, { ...(config.eventStorePassword === undefined ? {} : { password: config.eventStorePassword }), tls: config.eventStoreTls ?? false });
  } else if (config.eventStoreUrl) {
    const { EventStoreDbEventStore } = await import('../event-store/eventstoredb-event-store.js');
    inner = new EventStoreDbEventStore(config.eventStoreUrl);
  } else {
    makePrivateDirectory(dirname(config.eventsFile));
    inner = new SqliteEventStore(config.eventsFile);
  }
  return new SchemaCheckedEventStore(inner, new EventSchemas());
}

export async function openBlobStore(config: Config): Promise<BlobStore> {
  if (!config.blobStore) return new LocalBlobStore(config.blobsDir);
  const [{ S3BlobStore }, { createS3Client }] = await Promise.all([import('../blob-store/s3-blob-store.js'), import('../platform/s3-client.js')]);
  return new S3BlobStore(createS3Client(config.s3), config.blobStore);
}

export async function openMessageLog(config: Config, logger: Logger): Promise<MessageLog> {
  if (!config.kafka) return new EmbeddedMessageLog();
  const { KafkaMessageLog } = await import('../message-log/kafka-message-log.js');
  return new KafkaMessageLog(
    { brokers: config.kafka.brokers, clientId: config.kafka.clientId, sessionTimeoutMs: config.kafka.sessionTimeoutMs, security: config.kafka.security },
    logger.child({ component: 'kafka' }),
  );
}

/** The stores every process uses, and the topics of its message log. */
export interface Adapters {
  readonly eventStore: EventStore;
  readonly blobStore: BlobStore;
  readonly messageLog: MessageLog;
  readonly topics: readonly TopicSpec[];
  /** Whether the local storage is full: told of every append and put, and of the read models' writes. */
  readonly storage: StorageSpace;
  /** Whether a networked event store answers now (for /ready). */
  readonly eventStoreReachability: EventStoreReachability;
}

/**
 * Opens the event store, the blob store and the message log. A production event store or Kafka
 * cluster that is still away is waited for until the start-up deadline (STARTUP_TIMEOUT_SECONDS).
 */
export async function openAdapters(context: { config: Config; logger: Logger; lifecycle: Lifecycle; eventStore?: EventStore | undefined; metrics?: Metrics }): Promise<Adapters> {
  const { config, logger, lifecycle } = context;
  const deadline: StartupDeadline = { at: Date.now() + config.startupTimeoutSeconds * 1000, setting: `STARTUP_TIMEOUT_SECONDS=${config.startupTimeoutSeconds}` };
  const storage = new StorageSpace(logger.child({ component: 'storage' }), localStorageDirectories(config));
  lifecycle.opened('the storage watch', () => storage.stop());
  if (context.metrics) observeStorage(context.metrics, storage);
  const opened = context.eventStore ?? (await openEventStore(config));
  const appendDuration = context.metrics?.eventStoreAppendDuration;
  const eventStore = new SpaceWatchedEventStore(appendDuration ? new AppendTimedEventStore(opened, (seconds) => appendDuration.observe(seconds)) : opened, storage);
  lifecycle.opened('the event store', () => eventStore.close());
  if (eventStore.kind !== 'embedded' && !context.eventStore) {
    await reachBeforeDeadline(() => eventStore.headPosition(), { dependency: 'event store', variable: 'EVENTSTORE_URL', deadline, logger });
  }
  const eventStoreReachability = new EventStoreReachability(eventStore);
  eventStoreReachability.start();
  lifecycle.opened('the event store probe', () => eventStoreReachability.stop());
  const blobStore = new SpaceWatchedBlobStore(await openBlobStore(config), storage);
  const messageLog = await openMessageLog(config, logger);
  lifecycle.opened('the message log', () => messageLog.close().catch((error: unknown) => logger.warn({ err: error }, 'message log did not close cleanly')));
  const topics = config.kafka ? spoolTopics(config.kafka.partitions) : spoolTopics(4, config.batchParallelChunks);
  if (messageLog.kind === 'kafka') {
    await reachBeforeDeadline(() => messageLog.ensureTopics(topics), { dependency: 'Kafka cluster', variable: `KAFKA_BROKERS (${config.kafka?.brokers.join(',')})`, deadline, logger });
  }
  return { eventStore, blobStore, messageLog, topics, storage, eventStoreReachability };
}

/** Where this process writes on local file systems: DATA_DIR, and a file: event store or blob store elsewhere. */
function localStorageDirectories(config: Config): string[] {
  const directories = new Set([config.dataDir]);
  if (!config.eventStoreUrl) directories.add(dirname(config.eventsFile));
  if (!config.blobStore) directories.add(config.blobsDir);
  return [...directories];
}

/** DATA_DIR exists and is writable, or the start stops naming it. */
export function prepareDataDir(dataDir: string): void {
  inDataDir(dataDir, () => {
    makePrivateDirectory(dataDir);
    accessSync(dataDir, constants.W_OK);
  });
}

/** Runs a step that writes under DATA_DIR; a file-system refusal becomes a failure naming DATA_DIR. */
export function inDataDir<T>(dataDir: string, action: () => T): T {
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
