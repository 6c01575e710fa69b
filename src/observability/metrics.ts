import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The label values a gauge reports at scrape time. */
type GaugeReading = ReadonlyArray<{ readonly labels: Record<string, string>; readonly value: number }>;

/**
 * One process's Prometheus registry and series. One per running service, not a module-level
 * singleton: several services share a process in tests, each with its own numbers. Labels are
 * bounded by configuration (route patterns, models, replicas, statuses), never an id of a batch,
 * line, file, job or account.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequestDuration: Histogram<'route' | 'method' | 'status'>;
  readonly batchLines: Counter<'outcome' | 'endpoint'>;
  readonly tokens: Counter<'kind' | 'model'>;
  readonly engineRequestDuration: Histogram<'model' | 'class'>;
  readonly batchDeadlineMargin: Histogram;
  readonly batchLinesAfterDeadline: Counter;
  readonly weightSyncStepDuration: Histogram<'step'>;
  readonly weightSyncFailures: Counter<'step'>;
  readonly eventStoreAppendDuration: Histogram;

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.httpRequestDuration = new Histogram({ name: 'spool_http_request_duration_seconds', help: 'HTTP requests answered, by route pattern, method and status class', labelNames: ['route', 'method', 'status'], registers });
    this.batchLines = new Counter({ name: 'spool_batch_lines_total', help: 'Batch lines whose outcome this process recorded', labelNames: ['outcome', 'endpoint'], registers });
    this.tokens = new Counter({ name: 'spool_tokens_total', help: 'Tokens the engines reported for the batch lines this process recorded', labelNames: ['kind', 'model'], registers });
    this.engineRequestDuration = new Histogram({ name: 'spool_engine_request_duration_seconds', help: 'Engine requests, from the slot being given to the answer', labelNames: ['model', 'class'], buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120], registers });
    this.batchDeadlineMargin = new Histogram({ name: 'spool_batch_deadline_margin_seconds', help: 'Per finished batch: its deadline minus its completion (negative when late)', buckets: [-3600, -600, -60, 0, 60, 600, 3600, 6 * 3600, 12 * 3600, 24 * 3600], registers });
    this.batchLinesAfterDeadline = new Counter({ name: 'spool_batch_lines_after_deadline_total', help: "Batch lines recorded after their batch's deadline", registers });
    this.weightSyncStepDuration = new Histogram({ name: 'spool_weight_sync_step_duration_seconds', help: 'Weight sync steps: validate the checkpoint, transfer its shards, reload the replicas', labelNames: ['step'], buckets: [0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 900], registers });
    this.weightSyncFailures = new Counter({ name: 'spool_weight_sync_failures_total', help: 'Weight sync attempts that failed (retried later)', labelNames: ['step'], registers });
    this.eventStoreAppendDuration = new Histogram({ name: 'spool_event_store_append_duration_seconds', help: 'Appends to the event store', buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5], registers });
  }

  /** A gauge whose values are read when Prometheus scrapes, from the given reading. */
  readAtScrape(name: string, help: string, labelNames: readonly string[], read: () => GaugeReading | Promise<GaugeReading>): void {
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const { labels, value } of await read()) this.set(labels, value);
      },
    });
  }

  /** Times `work` into a histogram (with the given labels), whatever its end. */
  static async timed<T, L extends string>(histogram: Histogram<L>, labels: Partial<Record<L, string>>, work: () => Promise<T>): Promise<T> {
    const stop = histogram.startTimer(labels);
    try {
      return await work();
    } finally {
      stop();
    }
  }

  /** The exposition text and its content type. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** An HTTP status as its class: 2xx, 4xx, … */
export const statusClass = (status: number): string => `${Math.floor(status / 100)}xx`;
