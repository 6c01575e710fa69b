import type { Logger } from 'pino';
import { SERVICE_VERSION } from '../http/app.js';
import type { ReadinessReport } from '../http/routes/system.js';
import type { Adapters } from './adapters.js';
import type { StorageSpace } from '../platform/storage-space.js';
import type { ProcessParts } from './parts.js';
import type { Role } from './roles.js';
import type { Workers } from './workers.js';

/**
 * The /ready report of a process. Not ready: this process cannot do its job. Degraded: it serves,
 * but some of the work it accepts waits (a process with the API still takes files and batches while
 * the relay or the processors are away, or while a model has no healthy replica), or some is
 * refused (while the storage is full, or a networked event store does not answer: reads are served
 * from the read models, writes answer 503). A process without the API is not ready while its event
 * store or message log is away. Each change of the report is logged once, with its internal
 * causes.
 */
export function readinessReport(context: { roles: ReadonlySet<Role>; logger: Logger; adapters: Adapters; parts: ProcessParts; workers: Workers; storage: StorageSpace; warnings?: readonly string[] }): () => ReadinessReport {
  const { roles, logger, adapters, parts, workers, storage, warnings } = context;
  let lastReported = '';
  return () => {
    const { consumers, relay } = workers;
    const projections = parts.opened.application?.projector.status();
    const fleet = parts.opened.fleet?.fleet;
    const allWarnings = [...(warnings ?? []), ...(fleet?.warnings() ?? [])];
    // Kinds only: paths, bucket names and broker addresses stay in the logs, away from anonymous callers.
    const details = {
      version: SERVICE_VERSION,
      roles: [...roles],
      event_store: adapters.eventStore.kind,
      blob_store: adapters.blobStore.kind,
      message_log: adapters.messageLog.kind,
      projections: { position: projections?.position ?? null },
      // On Kafka, the partitions of its work topic the consumer holds now (a group still settling shows it).
      ...(consumers.length > 0 ? { processors: Object.fromEntries(consumers.map((consumer) => [consumer.kind, { handled: consumer.handled, ...partitionsOf(consumer) }])) } : {}),
      ...(relay ? { relay: { relayed: relay.relayed } } : {}),
      // What the operator should know of how this process is set up (the API open beyond loopback
      // without accounts, a built-in model that could not be had).
      ...(allWarnings.length > 0 ? { warnings: allWarnings } : {}),
    };
    const notReady: string[] = [];
    const degraded: string[] = [];
    const dependencyAway = roles.has('api') ? degraded : notReady;
    if (projections?.failed) notReady.push('projections failed');
    else if (projections && !projections.caughtUp) notReady.push('projections are catching up');
    // A process with the API still serves what its read models hold; its writes answer 503 meanwhile.
    const eventStoreAway = !adapters.eventStoreReachability.reachable;
    if (eventStoreAway) dependencyAway.push('event store unreachable: writes are refused (503) until it answers');
    if (!workers.messagingStarted && (relay || consumers.length > 0)) dependencyAway.push('joining the message log');
    if (relay?.failure) dependencyAway.push('relay: publishing to the message log is failing');
    for (const model of fleet?.modelsWithoutHealthyReplica() ?? []) degraded.push(`model ${model}: no healthy replica`);
    // Nothing is lost meanwhile: what is refused was not taken, and the processors retry their work.
    if (storage.full) degraded.push('storage full: writes are refused until space is freed');
    const internal = [projections?.failed && `projections: ${projections.failed}`, relay?.failure && `relay: ${relay.failure}`, eventStoreAway && `event store: ${adapters.eventStoreReachability.cause}`].filter(Boolean);
    const report = JSON.stringify({ notReady, degraded, internal });
    if (report !== lastReported && (notReady.length > 0 || degraded.length > 0 || lastReported !== '')) {
      lastReported = report;
      logger.warn({ not_ready: notReady, degraded, causes: internal }, notReady.length > 0 ? 'not ready' : degraded.length > 0 ? 'serving degraded' : 'ready again');
    }
    if (notReady.length > 0) return { ready: false, reasons: notReady, degraded, details };
    return { ready: true, reasons: [], degraded, details };
  };
}

function partitionsOf(consumer: { partitionsHeld(): readonly number[] | undefined }): { partitions?: number[] } {
  const held = consumer.partitionsHeld();
  return held ? { partitions: [...held].sort((a, b) => a - b) } : {};
}
