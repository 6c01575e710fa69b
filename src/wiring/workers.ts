import { hostname } from 'node:os';
import { join } from 'node:path';
import { OutboundTargets } from '../platform/outbound-targets.js';
import type { Logger } from 'pino';
import { BatchDeadlineWatch } from '../../processors/watches/batch-deadline-watch.js';
import { BatchProgressLog } from '../../processors/watches/batch-progress-log.js';
import { BatchExpiryWatch } from '../../processors/watches/batch-expiry-watch.js';
import { BatchFinalizer } from '../../processors/batch/batch-finalizer.js';
import { BatchRunner } from '../../processors/batch/batch-runner.js';
import { BatchValidator } from '../../processors/batch/batch-validator.js';
import { BlobDebrisSweeper } from '../../processors/watches/blob-debris-sweeper.js';
import { EventRelay, MemoryRelayCheckpoint, SqliteRelayCheckpoint } from '../../processors/messaging/event-relay.js';
import { FileExpirySweeper } from '../../processors/watches/file-expiry-sweeper.js';
import { RenderedChunkHandoff } from '../../processors/batch/rendered-chunk-handoff.js';
import { ChunkOutputParts } from '../../processors/batch/chunk-output-parts.js';
import { InteractiveLoadListener, InteractiveLoadReporter } from '../../processors/messaging/interactive-load-exchange.js';
import { WebhookDeliverer } from '../../processors/watches/webhook-deliverer.js';
import { WorkConsumer } from '../../processors/messaging/work-consumer.js';
import { WeightSyncer } from '../../processors/weights/weight-syncer.js';
import { BlobReferences } from '../application/blob-references.js';
import type { Clock } from '../platform/clock.js';
import { type Backoff, retryUntil } from '../platform/retry.js';
import type { Config } from '../config.js';
import { MessageSchemas, PROCESSOR_KINDS, type ProcessorKind, WORK_TOPICS } from '../messages/topics.js';
import type { TopicSpec } from '../message-log/message-log.js';
import type { WorkMessage } from '../messages/work-message.js';
import type { Adapters } from './adapters.js';
import type { Lifecycle } from './lifecycle.js';
import type { Metrics } from '../observability/metrics.js';
import type { Tracing } from '../observability/tracing.js';
import { observeRelay, weightSyncObserver } from './metrics-wiring.js';
import type { ProcessParts } from './parts.js';
import type { Role } from './roles.js';

export interface WorkerContext {
  readonly config: Config;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly adapters: Adapters;
  readonly parts: ProcessParts;
  readonly lifecycle: Lifecycle;
  readonly metrics: Metrics;
  readonly tracing: Tracing;
}

/** Local disk for files a processor assembles before storing them (work files, output in input order). */
const scratchDirOf = (config: Config) => join(config.dataDir, 'scratch');

/** Chunk messages an inference processor holds per partition, beyond those it runs. */
const HELD_CHUNKS_PER_PARTITION = 32;

/**
 * Validations a validator runs at once per partition: each holds its batch's custom ids and line
 * table (about 5 MiB for 50,000 lines), so a few, not dozens.
 */
const VALIDATIONS_PER_PARTITION = 2;

/** Batches a finalizer finishes at once per partition: each holds a copy buffer and a few open parts. */
const FINALIZATIONS_PER_PARTITION = 4;

const partitionsOf = (topics: readonly TopicSpec[], topic: string): number => topics.find((spec) => spec.topic === topic)?.partitions ?? 1;

/** Joining the message log once the process serves: no deadline, so the wait grows to 10 s. */
const MESSAGING_BACKOFF: Backoff = { firstMs: 500, maxMs: 10_000 };

/** One processor kind as its consumer runs it. */
interface Processor {
  /** Partitions of its topic handled at once. */
  readonly concurrency: number;
  /** Messages of one partition handled at once (default 1: one after another). */
  readonly prefetch?: number;
  readonly handle: (message: WorkMessage) => Promise<void>;
  /** Work of its own that begins with the consumers, once the read models hold the whole log. */
  readonly start?: () => void;
}

/** What the processors of one process share. */
interface ProcessorContext extends WorkerContext {
  /** Where the process runs both inference and the finalizer: a batch's only chunk, rendered by its run for the finalizer. */
  readonly renderedChunks: RenderedChunkHandoff | undefined;
  /** One for the runner and the finalizer of the process: the finalizer's discard waits for the runner's writes under way. */
  readonly chunkParts: ChunkOutputParts | undefined;
}

/** The work table: each processor kind, what it is made of and what it does with its topic's messages. */
const PROCESSORS: Readonly<Record<ProcessorKind, (context: ProcessorContext) => Promise<Processor>>> = {
  validator: async ({ config, clock, logger, adapters, parts, tracing }) => {
    const { batches, batchesQueries } = parts.application();
    const { fleet } = await parts.fleet();
    // On Kafka any number of inference processors share the inference partitions: each batch is
    // cut into at least one chunk per partition, so that each processor holds its part of it
    // and sharing between jobs, decided in each processor, is fair across the fleet.
    const spreadOver = adapters.messageLog.kind === 'kafka' ? (adapters.topics.find((topic) => topic.topic === WORK_TOPICS.inference)?.partitions ?? 1) : 1;
    const validator = new BatchValidator({
      eventStore: adapters.eventStore,
      blobStore: adapters.blobStore,
      batches,
      queries: batchesQueries,
      engines: fleet,
      clock,
      log: logger.child({ component: 'batch-validator' }),
      chunkLines: config.batchChunkLines,
      spreadOver,
      tracing,
      prefixOrder: config.batchPrefixOrder,
      scratchDir: scratchDirOf(config),
      quotas: parts.application().accountsQueries,
    });
    // Every partition at once, and a few of each partition's messages together: validations one
    // after another held many small batches created at once to about 9 a second.
    return {
      concurrency: partitionsOf(adapters.topics, WORK_TOPICS.validator),
      prefetch: VALIDATIONS_PER_PARTITION,
      handle: (message) => (message.kind === 'validate-batch' ? validator.validate(message.batch_id) : Promise.resolve()),
    };
  },
  inference: async ({ config, clock, logger, adapters, parts, lifecycle, tracing, renderedChunks, chunkParts }) => {
    const { batches, batchesQueries, outcomes } = parts.application();
    const { fleet } = await parts.fleet();
    const runner = new BatchRunner({
      blobStore: adapters.blobStore,
      batches,
      queries: batchesQueries,
      outcomes,
      engines: fleet,
      clock,
      log: logger.child({ component: 'batch-runner' }),
      parallelChunks: config.batchParallelChunks,
      tracing,
      parts: chunkParts,
      renderedChunks,
    });
    // No new line of batch work goes out once a stop begins; lines already sent are waited for and recorded.
    lifecycle.whenStopBegins(() => runner.stop());
    lifecycle.reportWhileStopping(() => {
      const chunks = runner.runningChunks;
      return chunks > 0 ? `${chunks} batch chunk${chunks === 1 ? '' : 's'} finishing the requests already sent` : undefined;
    });
    lifecycle.opened('the batch runner', () => runner.idle());
    // Every inference partition is consumed at once, and several chunks of each are held: the
    // batch runner, not the order of messages, chooses which chunks run (BATCH_PARALLEL_CHUNKS of
    // them, by deadline). A held chunk costs a promise, not its lines.
    const partitions = adapters.topics.find((topic) => topic.topic === WORK_TOPICS.inference)?.partitions ?? config.batchParallelChunks;
    return { concurrency: partitions, prefetch: HELD_CHUNKS_PER_PARTITION, handle: (message) => (message.kind === 'run-chunk' ? runner.run(message.batch_id, message.chunk) : Promise.resolve()) };
  },
  finalizer: async ({ config, clock, logger, adapters, parts, lifecycle, metrics, tracing, renderedChunks, chunkParts }) => {
    const { batches, batchesQueries, outcomes, files } = parts.application();
    const finalizer = new BatchFinalizer({
      batches,
      queries: batchesQueries,
      outcomes,
      files,
      clock,
      log: logger.child({ component: 'batch-finalizer' }),
      onFinished: (margin) => margin !== undefined && metrics.batchDeadlineMargin.observe(margin),
      tracing,
      scratchDir: scratchDirOf(config),
      discardWorkFile: (key) => adapters.blobStore.delete(key),
      parts: chunkParts,
      renderedChunks,
    });
    // Time is not an event: the finalizers start the expiry of overdue batches.
    const expiryWatch = new BatchExpiryWatch({ queries: batchesQueries, batches, clock, log: logger.child({ component: 'batch-expiry' }), intervalMs: config.batchExpiryCheckMs });
    lifecycle.opened('the batch expiry watch', () => expiryWatch.stop());
    // ...and flag batches that, at their current rate, will miss their deadline.
    const deadlineWatch = new BatchDeadlineWatch({ queries: batchesQueries, batches, clock, log: logger.child({ component: 'batch-deadline' }), intervalMs: config.batchExpiryCheckMs });
    lifecycle.opened('the batch deadline watch', () => deadlineWatch.stop());
    // ...and say in the logs how running batches are getting on.
    const progressLog =
      config.batchProgressLogSeconds > 0 ? new BatchProgressLog({ queries: batchesQueries, clock, log: logger.child({ component: 'batch-progress' }), intervalMs: config.batchProgressLogSeconds * 1000 }) : undefined;
    if (progressLog) lifecycle.opened('the batch progress log', () => progressLog.stop());
    // The finalizers, which write batches' terminal events, also deliver them to webhooks.
    const { webhooks, webhooksQueries } = parts.application();
    const retryBaseMs = config.webhookRetryBaseMs;
    const deliverer = new WebhookDeliverer(
      { queries: webhooksQueries, webhooks, now: Date.now, log: logger.child({ component: 'webhook-deliverer' }), targets: new OutboundTargets(config.webhookAllowedTargets) },
      { retryBaseMs, intervalMs: Math.min(1000, retryBaseMs), timeoutMs: 10_000 },
    );
    lifecycle.opened('the webhook deliverer', () => deliverer.stop());
    // As the validator: every partition at once, several batches of each together.
    return {
      concurrency: partitionsOf(adapters.topics, WORK_TOPICS.finalizer),
      prefetch: FINALIZATIONS_PER_PARTITION,
      handle: (message) => (message.kind === 'finalize-batch' ? finalizer.finalize(message.batch_id) : Promise.resolve()),
      start: () => {
        expiryWatch.start();
        deadlineWatch.start();
        progressLog?.start();
        deliverer.start();
      },
    };
  },
  checkpoint: async ({ config, clock, logger, parts, lifecycle, metrics }) => {
    const { weightSync, weightsQueries } = parts.application();
    const { fleet, servedWeights } = await parts.fleet();
    const weightSyncer = new WeightSyncer({
      weightSync,
      queries: weightsQueries,
      fleet,
      servedWeights,
      clock,
      log: logger.child({ component: 'weight-syncer' }),
      stagingDir: join(config.dataDir, 'staging'),
      openSource: async () => {
        const [{ S3CheckpointSource }, { createS3Client }] = await Promise.all([import('../engine/checkpoint-source.js'), import('../platform/s3-client.js')]);
        return new S3CheckpointSource(createS3Client(config.s3), config.s3);
      },
      retryDelayMs: config.weightSyncRetryMs,
      observer: weightSyncObserver(metrics),
      probe: config.weightSyncProbe,
    });
    lifecycle.opened('the weight syncer', () => weightSyncer.stop());
    return { concurrency: 2, handle: (message) => (message.kind === 'sync-weights' ? weightSyncer.step(message.model) : Promise.resolve()) };
  },
};

/** What runs beside the HTTP API and the processors' handlers: consumers, relay, sweepers. */
export interface Workers {
  readonly consumers: readonly WorkConsumer[];
  readonly relay: EventRelay | undefined;
  /** The file expiry sweeper, in a process with the API. */
  readonly sweeper: FileExpirySweeper | undefined;
  /** The blob debris sweeper, in a process with the API. */
  readonly debrisSweeper: BlobDebrisSweeper | undefined;
  /** The consumers joined their groups and the relay publishes. */
  readonly messagingStarted: boolean;
  startSweepers(): void;
  /** Creates the topics, joins the consumer groups and starts the relay, retrying each until it succeeds or the process stops. */
  startMessaging(): Promise<void>;
}

/** Wires the workers of the given roles. */
export async function wireWorkers(roles: ReadonlySet<Role>, context: WorkerContext): Promise<Workers> {
  const { config, logger, adapters, parts, lifecycle } = context;
  const { eventStore, messageLog, topics } = adapters;
  const sweepers = roles.has('api') ? wireSweepers(context) : undefined;

  const schemas = new MessageSchemas();
  const processors: Processor[] = [];
  const consumers: WorkConsumer[] = [];
  const processorContext: ProcessorContext = {
    ...context,
    renderedChunks: roles.has('inference') && roles.has('finalizer') ? new RenderedChunkHandoff() : undefined,
    chunkParts: roles.has('inference') || roles.has('finalizer') ? new ChunkOutputParts({ blobStore: adapters.blobStore, outcomes: parts.application().outcomes, log: logger.child({ component: 'chunk-output-parts' }) }) : undefined,
  };
  for (const kind of PROCESSOR_KINDS) {
    if (!roles.has(kind)) continue;
    const processor = await PROCESSORS[kind](processorContext);
    processors.push(processor);
    const { projector } = parts.application();
    consumers.push(
      new WorkConsumer({
        kind,
        messageLog,
        schemas,
        eventStore,
        projector,
        concurrency: processor.concurrency,
        ...(processor.prefetch ? { prefetch: processor.prefetch } : {}),
        log: logger.child({ component: `${kind}-processor` }),
        handle: processor.handle,
        storage: adapters.storage,
      }),
    );
  }
  // One step for all: each consumer finishes and commits what it handles, then leaves its group.
  if (consumers.length > 0) {
    lifecycle.opened('the processors', () => Promise.all(consumers.map((consumer) => consumer.stop().catch((error: unknown) => logger.warn({ err: error }, 'consumer did not stop cleanly')))));
  }
  const relay = roles.has('relay')
    ? new EventRelay({
        eventStore,
        messageLog,
        schemas,
        // The embedded log starts empty at every start, so the relay starts from the beginning too.
        checkpoint: messageLog.kind === 'kafka' ? new SqliteRelayCheckpoint(join(config.dataDir, 'relay.sqlite')) : new MemoryRelayCheckpoint(),
        log: logger.child({ component: 'relay' }),
        storage: adapters.storage,
        // Downstream consumers read batch-events on Kafka; the embedded log has no reader outside the process.
        batchEvents: messageLog.kind === 'kafka',
      })
    : undefined;
  if (relay) {
    lifecycle.opened('the relay', () => relay.stop());
    observeRelay(context.metrics, relay, eventStore);
  }

  const { reporter, listener } = await wireInteractiveLoad(roles, context, schemas, consumers);

  let messagingStarted = false;
  return {
    consumers,
    relay,
    sweeper: sweepers?.sweeper,
    debrisSweeper: sweepers?.debrisSweeper,
    get messagingStarted() {
      return messagingStarted;
    },
    startSweepers: () => {
      sweepers?.sweeper.start();
      sweepers?.debrisSweeper.start();
    },
    startMessaging: async () => {
      const stopped = () => lifecycle.stopping;
      // Tries a step until it succeeds (a broker may still be starting) or the process stops.
      const retried = (step: () => Promise<void>, what: string) =>
        retryUntil(step, { backoff: MESSAGING_BACKOFF, stopped, onFailure: (error, { retryInMs }) => logger.warn({ err: error, retry_in_ms: retryInMs }, `${what} failed; trying again`) });
      // Kafka's topics were made before the start went on; the embedded log's cannot fail.
      if (messageLog.kind === 'embedded') await retried(() => messageLog.ensureTopics(topics), 'creating the topics');
      for (const consumer of consumers) await retried(() => consumer.start(), 'joining a consumer group');
      if (listener) await retried(() => listener.start(), 'joining the interactive load reports');
      if (stopped()) return;
      relay?.start();
      reporter?.start();
      for (const processor of processors) processor.start?.();
      messagingStarted = true;
    },
  };

}

/**
 * On Kafka the API and the inference processors are different processes sending to the same
 * engines: the API reports the interactive load it serves, and each inference processor keeps its
 * part of the slots free for it. The embedded default runs both in one scheduler: nothing to say.
 */
async function wireInteractiveLoad(roles: ReadonlySet<Role>, { logger, adapters, parts, lifecycle }: WorkerContext, schemas: MessageSchemas, consumers: readonly WorkConsumer[]) {
  if (adapters.messageLog.kind !== 'kafka') return { reporter: undefined, listener: undefined };
  const source = `${hostname()}:${process.pid}`;
  const { messageLog, topics } = adapters;
  let reporter: InteractiveLoadReporter | undefined;
  let listener: InteractiveLoadListener | undefined;
  if (roles.has('api')) {
    const { fleet } = await parts.fleet();
    const started = new InteractiveLoadReporter({ messageLog, schemas, pools: () => fleet.allPools(), source, log: logger.child({ component: 'interactive-load' }) });
    lifecycle.opened('the interactive load reports', () => started.stop());
    reporter = started;
  }
  const inference = consumers.find((consumer) => consumer.kind === 'inference');
  if (inference) {
    const { fleet } = await parts.fleet();
    const partitions = topics.find((topic) => topic.topic === WORK_TOPICS.inference)?.partitions ?? 1;
    const opened = new InteractiveLoadListener({
      messageLog,
      schemas,
      poolFor: (model) => fleet.engineFor(model),
      // Each inference processor runs the batch work of the partitions it holds: its part of the reserve.
      share: () => {
        const held = inference.partitionsHeld();
        return held === undefined ? 1 : { held, of: partitions };
      },
      source,
      // Every process reads every report: a group of its own.
      groupId: `spool-interactive-load-${source}`.replace(/[^A-Za-z0-9._-]/g, '-'),
      log: logger.child({ component: 'interactive-load' }),
    });
    lifecycle.opened('the interactive load listener', () => opened.stop());
    listener = opened;
  }
  return { reporter, listener };
}

/** The API's sweepers: expired files, and what crashes leave in the blob store. */
function wireSweepers({ config, clock, logger, adapters, parts, lifecycle }: WorkerContext) {
  const { eventStore, blobStore } = adapters;
  const { files, filesQueries } = parts.application();
  const sweeper = new FileExpirySweeper({ files, queries: filesQueries, clock, log: logger.child({ component: 'file-expiry-sweeper' }) }, config.fileSweepIntervalSeconds * 1000);
  lifecycle.opened('the file expiry sweeper', () => sweeper.stop());
  const debrisSweeper = new BlobDebrisSweeper(
    { blobStore, references: new BlobReferences({ eventStore, filesQueries }), log: logger.child({ component: 'blob-debris-sweeper' }) },
    { intervalMs: config.blobSweepIntervalSeconds * 1000, graceMs: config.blobDebrisGraceSeconds * 1000 },
  );
  lifecycle.opened('the blob debris sweeper', () => debrisSweeper.stop());
  return { sweeper, debrisSweeper };
}
