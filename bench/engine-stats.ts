// What the engine simulator reports about itself: GET /stats (a measurement window, reset by each
// read, as in the fixed-latency mode), GET /metrics (vLLM's gauges and counters) and GET /log
// (requests in the order they first joined the batch).
import type { EngineLoad, StepRecord } from '../test/support/engine-model/continuous-batching-engine.js';
import type { EngineClock } from '../test/support/engine-model/engine-clock.js';

/** Bounded so a long benchmark cannot grow it without end; tests read far fewer. */
const LOG_LIMIT = 100_000;

export interface EngineCounters {
  readonly steps: number;
  readonly promptTokens: number;
  readonly finished: number;
  readonly generationTokens?: number;
  readonly preemptions?: number;
}

export class EngineStats {
  /** Requests in the order they first joined the batch, with their priority and first text. */
  readonly started: Array<{ marker: string; priority: number }> = [];
  private served = 0;
  private maxActive = 0;
  private readonly latencies = new Map<number, number[]>();
  private firstAt: number | undefined;
  private lastAt = 0;
  private steps = 0;
  private sequenceSteps = 0;
  /** Sequences in the running batch, integrated over time. */
  private activeIntegral = 0;
  private base: EngineCounters;

  constructor(
    private readonly clock: EngineClock,
    private readonly counters: () => EngineCounters,
  ) {
    this.base = { ...counters() };
  }

  arrived(): void {
    this.firstAt ??= this.clock.now;
  }

  step(record: StepRecord): void {
    this.steps += 1;
    this.sequenceSteps += record.sequences;
    this.activeIntegral += record.running * record.durationMs;
    this.maxActive = Math.max(this.maxActive, record.running);
    this.lastAt = Math.max(this.lastAt, record.startedAt + record.durationMs);
  }

  start(marker: string, priority: number): void {
    if (this.started.length < LOG_LIMIT) this.started.push({ marker, priority });
  }

  answered(priority: number, latencyMs: number): void {
    this.served += 1;
    const values = this.latencies.get(priority) ?? [];
    values.push(latencyMs);
    this.latencies.set(priority, values);
  }

  /** The window's figures; a new window starts with the next request. */
  read(): Record<string, unknown> {
    const spanMs = this.firstAt === undefined ? 0 : this.lastAt - this.firstAt;
    const now = this.counters();
    const delta = (key: keyof EngineCounters) => (now[key] ?? 0) - (this.base[key] ?? 0);
    const figures = {
      served: this.served,
      maxActive: this.maxActive,
      meanActive: spanMs > 0 ? this.activeIntegral / spanMs : 0,
      latencyByPriority: summary(this.latencies),
      steps: this.steps,
      stepsPerSecond: spanMs > 0 ? (this.steps * 1000) / spanMs : 0,
      meanBatchSize: this.steps > 0 ? this.sequenceSteps / this.steps : 0,
      promptTokens: delta('promptTokens'),
      ...(now.generationTokens === undefined ? {} : { generationTokens: delta('generationTokens'), preemptions: delta('preemptions') }),
    };
    this.served = this.maxActive = this.steps = this.sequenceSteps = this.activeIntegral = this.lastAt = 0;
    this.firstAt = undefined;
    this.latencies.clear();
    this.base = { ...now };
    return figures;
  }
}

function summary(latencies: Map<number, number[]>): Record<string, { count: number; meanMs: number; p50Ms: number; p95Ms: number; maxMs: number }> {
  const result: Record<string, { count: number; meanMs: number; p50Ms: number; p95Ms: number; maxMs: number }> = {};
  for (const [priority, values] of latencies) {
    const sorted = [...values].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
    result[String(priority)] = { count: sorted.length, meanMs: sorted.reduce((a, b) => a + b, 0) / sorted.length, p50Ms: at(0.5), p95Ms: at(0.95), maxMs: sorted[sorted.length - 1]! };
  }
  return result;
}

/** vLLM's /metrics, as far as the engine models have them: load gauges and token and request counters. */
export function metricsText(model: string, load: EngineLoad, counters: EngineCounters): string {
  const label = `{model_name="${model}"}`;
  const gauge = (name: string, help: string, value: number) => `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name}${label} ${value}\n`;
  // Prometheus' own client names a counter's sample NAME_total, as vLLM's pages show.
  const counter = (name: string, help: string, value: number | undefined) =>
    value === undefined ? '' : `# HELP ${name} ${help}\n# TYPE ${name} counter\n${name}_total${label} ${value}\n`;
  return (
    gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', load.running) +
    gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', load.waiting) +
    gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', load.kvUsage) +
    counter('vllm:num_preemptions', 'Cumulative number of preemption from the engine.', counters.preemptions) +
    counter('vllm:prompt_tokens', 'Number of prefill tokens processed.', counters.promptTokens) +
    counter('vllm:generation_tokens', 'Number of generation tokens processed.', counters.generationTokens) +
    counter('vllm:request_success', 'Count of successfully processed requests.', counters.finished)
  );
}
