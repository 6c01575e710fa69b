import type { FastifyInstance } from 'fastify';
import type { WeightSyncObserver } from '../../processors/weights/weight-syncer.js';
import type { BatchesQueries } from '../../projections/batches-projection.js';
import type { Projector } from '../../projections/projector.js';
import type { Clock } from '../platform/clock.js';
import type { Config } from '../config.js';
import type { LineOutcome } from '../domain/line-outcome.js';
import type { Fleet } from '../engine/fleet.js';
import type { EventStore, Position } from '../event-store/event-store.js';
import { type Metrics, statusClass } from '../observability/metrics.js';
import { ExitCode, StartupFailure } from '../process/startup-failure.js';
import type { StorageSpace } from '../platform/storage-space.js';
import { slotsForWaitingWork } from '../engine/scheduling/hold-ahead.js';
import type { Lifecycle } from './lifecycle.js';
import { nodeHttp } from '../platform/node-http.js';

/** Lag is counted up to this many events: past it, the number says "at least". */
const LAG_COUNT_CAP = 10_000;

const SERVICE_CLASSES = ['interactive', 'batch', 'background'] as const;

/** Events in the log after `position` (all of them when undefined), up to the cap. */
async function eventsAfter(eventStore: EventStore, position: Position | undefined): Promise<number> {
  return (await eventStore.readAll({ ...(position ? { after: position } : {}), maxCount: LAG_COUNT_CAP })).length;
}

/** Batches per status and each projection's lag, read when scraped. */
export function observeReadModels(metrics: Metrics, batches: BatchesQueries, projector: Projector, eventStore: EventStore): void {
  metrics.readAtScrape('spool_batches', 'Batches in each status (read models)', ['status'], () => batches.countByStatus().map(({ status, count }) => ({ labels: { status }, value: count })));
  metrics.readAtScrape('spool_projection_lag_events', 'Events in the log a projection has not applied yet', ['projection'], () =>
    Promise.all(projector.checkpointsByProjection().map(async ({ projection, position }) => ({ labels: { projection }, value: await eventsAfter(eventStore, position) }))),
  );
}

/** Each account's usage (ACCOUNTS=required), read when scraped: labelled by account, never by an object's id. */
export function observeAccounts(metrics: Metrics, accounts: { allUsage(): Array<{ account_id: string; queued_lines: number; queued_tokens: number; stored_bytes: number }> }): void {
  const gauge = (name: string, help: string, pick: (usage: { queued_lines: number; queued_tokens: number; stored_bytes: number }) => number) =>
    metrics.readAtScrape(name, help, ['account'], () => accounts.allUsage().map((usage) => ({ labels: { account: usage.account_id }, value: pick(usage) })));
  gauge('spool_account_queued_lines', "Lines of an account's batches not yet ended", (usage) => usage.queued_lines);
  gauge('spool_account_queued_tokens', "Estimated input tokens of an account's batches not yet ended", (usage) => usage.queued_tokens);
  gauge('spool_account_stored_bytes', "Bytes of an account's files not deleted or expired", (usage) => usage.stored_bytes);
}

/** Whether this process found its local storage full (an episode of StorageSpace), read when scraped. */
export function observeStorage(metrics: Metrics, storage: StorageSpace): void {
  metrics.readAtScrape('spool_storage_full', 'Whether this process found its local storage full: 1 from a write refused for lack of space until there is room and a write succeeded', [], () => [
    { labels: {}, value: storage.full ? 1 : 0 },
  ]);
}

/** Events in the log the relay has not published yet, read when scraped. */
export function observeRelay(metrics: Metrics, relay: { publishedUpTo(): Position | undefined }, eventStore: EventStore): void {
  metrics.readAtScrape('spool_relay_lag_events', 'Events in the log the relay has not published to the message log yet', [], async () => [{ labels: {}, value: await eventsAfter(eventStore, relay.publishedUpTo()) }]);
}

/**
 * The engines' load, queues and learned limits, read when scraped, and each request's duration.
 * A replica is labelled by its configured id; the ENGINE_BASE_URL engine's replica, whose id is
 * its URL, by a fixed name.
 */
export function observeFleet(metrics: Metrics, fleet: Fleet): void {
  const pools = fleet.allPools();
  for (const { model, pool } of pools) {
    // One series per class, looked up once: every engine request is observed.
    const series = new Map<string, { observe(seconds: number): void }>();
    pool.onRequestDone((serviceClass, seconds) => {
      let duration = series.get(serviceClass);
      if (!duration) series.set(serviceClass, (duration = metrics.engineRequestDuration.labels({ model, class: serviceClass })));
      duration.observe(seconds);
    });
  }
  const byClass = (read: (load: ReturnType<(typeof pools)[number]['pool']['load']>) => Record<(typeof SERVICE_CLASSES)[number], number>) => () =>
    pools.flatMap(({ model, pool }) => {
      const counts = read(pool.load());
      return SERVICE_CLASSES.map((serviceClass) => ({ labels: { model, class: serviceClass }, value: counts[serviceClass] }));
    });
  metrics.readAtScrape('spool_engine_requests_in_flight', 'Engine requests sent and not answered yet', ['model', 'class'], byClass((load) => load.inFlight));
  metrics.readAtScrape('spool_scheduler_queue_depth', 'Requests waiting in the scheduler for an engine slot', ['model', 'class'], byClass((load) => load.queued));
  metrics.readAtScrape('spool_scheduler_interactive_reserve', 'Engine slots batch work leaves free for interactive requests (their load here, or reported by the API on Kafka)', ['model'], () =>
    pools.map(({ model, pool }) => ({ labels: { model }, value: pool.interactiveReserve() })),
  );
  const replicaLabel = (model: string, id: string, index: number) => (model === '*' ? `engine-base-url-${index}` : id);
  metrics.readAtScrape('spool_engine_concurrency_limit', "Each replica's concurrency limit: learned, or its configured concurrency where it is not learned (the built-in embedding model)", ['model', 'replica'], () =>
    pools.flatMap(({ model, pool }) => pool.state().map((replica, index) => ({ labels: { model, replica: replicaLabel(model, replica.id, index) }, value: replica.limit }))),
  );
  metrics.readAtScrape('spool_engine_capacity_from_gauges', "1 while a replica's limit is guarded by its engine's load gauges (fresh), 0 while it is learned from throughput alone or not learned", ['model', 'replica'], () =>
    pools.flatMap(({ model, pool }) => pool.capacityState().map((replica, index) => ({ labels: { model, replica: replicaLabel(model, replica.id, index) }, value: replica.source === 'gauges' ? 1 : 0 }))),
  );
  metrics.readAtScrape('spool_engine_lookahead_requests', 'Requests the cruising limit keeps waiting inside the engine, as its gauges show', ['model', 'replica'], () =>
    pools.flatMap(({ model, pool }) =>
      pool.capacityState().flatMap((replica, index) => (replica.lookahead === undefined ? [] : [{ labels: { model, replica: replicaLabel(model, replica.id, index) }, value: replica.lookahead }])),
    ),
  );
  // The interactive objective, where one is set: what it is, what was measured, and the batch concurrency it allows.
  const objectives = () => pools.flatMap(({ model, pool }) => {
    const state = pool.objectiveState();
    return state ? [{ model, state }] : [];
  });
  metrics.readAtScrape('spool_interactive_p99_objective_seconds', "The objective for a model's interactive requests: their p99, waiting included", ['model'], () =>
    objectives().map(({ model, state }) => ({ labels: { model }, value: state.p99Ms / 1000 })),
  );
  metrics.readAtScrape('spool_interactive_p99_seconds', "The p99 of a model's interactive requests over the last minute, waiting included (with an objective)", ['model'], () =>
    objectives().flatMap(({ model, state }) => (state.measuredP99Ms === undefined ? [] : [{ labels: { model }, value: state.measuredP99Ms / 1000 }])),
  );
  metrics.readAtScrape('spool_batch_concurrency', 'The batch and background requests the scheduler keeps in flight at most now: the replicas\' limits less the interactive reserve, and the objective\'s cap', ['model'], () =>
    pools.map(({ model, pool }) => {
      const limits = pool.state().reduce((sum, replica) => sum + (replica.healthy ? replica.limit : 0), 0);
      return { labels: { model }, value: Math.max(0, Math.min(slotsForWaitingWork(limits, pool.interactiveReserve()), pool.objectiveState()?.batchCap ?? Number.POSITIVE_INFINITY)) };
    }),
  );
  metrics.readAtScrape('spool_interactive_objective_batch_cap', 'The batch and background requests the interactive objective allows in flight now; absent while it allows every slot', ['model'], () =>
    objectives().flatMap(({ model, state }) => (Number.isFinite(state.batchCap) ? [{ labels: { model }, value: state.batchCap }] : [])),
  );
}

/** Counts the line outcomes this process recorded: lines, tokens, and lines past their batch's deadline. */
export function countLineOutcomes(metrics: Metrics, batches: BatchesQueries, clock: Clock): (batchId: string, recorded: readonly LineOutcome[]) => void {
  return (batchId, recorded) => {
    const batch = batches.get(batchId);
    const endpoint = batch?.endpoint ?? 'unknown';
    const model = batch?.model ?? 'unknown';
    // Summed over the group first: one increment per series rather than three per line.
    let completed = 0;
    let prompt = 0;
    let completion = 0;
    for (const { type, data } of recorded) {
      if (type === 'LineCompleted') completed += 1;
      prompt += data.usage.prompt_tokens;
      completion += data.usage.completion_tokens;
    }
    if (completed > 0) metrics.batchLines.inc({ outcome: 'completed', endpoint }, completed);
    if (recorded.length > completed) metrics.batchLines.inc({ outcome: 'failed', endpoint }, recorded.length - completed);
    if (prompt > 0) metrics.tokens.inc({ kind: 'prompt', model }, prompt);
    if (completion > 0) metrics.tokens.inc({ kind: 'completion', model }, completion);
    if (batch?.expires_at != null && clock.nowSeconds() > batch.expires_at) metrics.batchLinesAfterDeadline.inc(recorded.length);
  };
}

export function weightSyncObserver(metrics: Metrics): WeightSyncObserver {
  return {
    stepDone: (step, seconds) => metrics.weightSyncStepDuration.observe({ step }, seconds),
    attemptFailed: (step) => metrics.weightSyncFailures.inc({ step }),
  };
}

/** Times every answered request by route pattern; serves /metrics here unless METRICS_PORT moves it. */
export function installHttpMetrics(app: FastifyInstance, metrics: Metrics, serveExposition: boolean): void {
  app.addHook('onResponse', async (request, reply) => {
    // The route pattern, never the URL: ids in paths would make a series per batch.
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.httpRequestDuration.observe({ route, method: request.method, status: statusClass(reply.statusCode) }, reply.elapsedTime / 1000);
  });
  if (!serveExposition) return;
  app.get('/metrics', { schema: { summary: 'Prometheus metrics of this process', tags: ['system'] } }, async (_request, reply) => {
    const { contentType, body } = await metrics.exposition();
    return reply.type(contentType).send(body);
  });
}

/** METRICS_PORT: /metrics alone on a port of its own. Returns its URL. */
export async function openMetricsServer(metrics: Metrics, config: Config, port: number, lifecycle: Lifecycle): Promise<string> {
  const server = nodeHttp.createServer((request, response) => {
    if (request.method !== 'GET' || request.url?.split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'Only GET /metrics is served on METRICS_PORT', type: 'invalid_request_error', param: null, code: 'not_found' } }));
      return;
    }
    metrics.exposition().then(
      ({ contentType, body }) => response.writeHead(200, { 'content-type': contentType }).end(body),
      () => response.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => reject(new StartupFailure(`METRICS_PORT ${port} on HOST ${config.host} cannot be listened on (${error.code})`, ExitCode.config, { cause: error })));
    server.listen(port, config.host, resolve);
  });
  lifecycle.opened('the metrics server', () => new Promise<void>((resolve) => server.close(() => resolve()).closeAllConnections()));
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  return `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${bound}`;
}
