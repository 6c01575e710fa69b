import type { EngineLoad } from './engine-load-metrics.js';

export interface AdaptiveConcurrencySettings {
  /** ENGINE_CONCURRENCY: the most it ever allows. */
  readonly ceiling: number;
  /** Where it starts; small, so the latency floor is measured before the engine is crowded. */
  readonly initial?: number;
  /** Smoothed latency above floor × tolerance means requests queue inside the engine. */
  readonly tolerance?: number;
  /** Factor on 429, 503 and timeouts. */
  readonly overloadBackoff?: number;
  /** Factor when latency or the engine's own queue says it is crowded. */
  readonly latencyBackoff?: number;
  /** Weight of a new sample in the smoothed latency. */
  readonly smoothing?: number;
  /** KV-cache usage (0–1) at which it stops growing. */
  readonly kvUsageHigh?: number;
  /** Engine load metrics older than this are ignored. */
  readonly loadStaleMs?: number;
}

/** How a request ended: answered (any answer but 429/503), overloaded (429/503), timeout, failed (other). */
export type RequestOutcome = 'answered' | 'overloaded' | 'timeout' | 'failed';

export interface RequestResult {
  /** When it was sent, epoch ms. */
  readonly startedAt: number;
  readonly latencyMs: number;
  readonly outcome: RequestOutcome;
  /** Requests in flight on the replica when it was sent, itself included. */
  readonly inFlight: number;
  /** The limit when it was sent (the limit now when absent). */
  readonly limit?: number;
}

/**
 * A replica's useful concurrency, learned from how it answers (in the spirit of TCP congestion
 * control and Netflix's Vegas/Gradient limits). Pure: every input carries its own time.
 *
 * - The floor is the lowest smoothed latency seen: the engine's time for a request when it is
 *   not crowded. Smoothing (EWMA) first keeps the floor from being one unusually short request.
 * - Smoothed latency above floor × tolerance: requests queue inside the engine, where Spool
 *   cannot reorder them; shrink by latencyBackoff. 429/503/timeouts: halve.
 * - A rise counts once a request sent after it was first seen is slow too: a pause that delays
 *   every request in flight at once (the engine's host stalling for a moment) is over within a
 *   round trip, while crowding inside the engine is not. Nothing grows meanwhile. Slow start
 *   halves for it, since it may have overshot by up to twice; it ends at the first cut or at the
 *   ceiling, which it cannot have overshot.
 * - At most one cut per window: only a request sent after the previous cut counts as new
 *   evidence, so the burst of failures one overload causes halves once, not once per request.
 * - Otherwise, when the limit was in use (≥ 90% of it in flight), grow: +1 per answer until the
 *   first cut (doubling per round trip, like slow start), then +1/limit (one per round trip).
 * - Engine metrics, when scraped: requests waiting inside the engine shrink it; a nearly full
 *   KV cache stops growth.
 * - A rise that shrinking to 1 did not cure is not crowding but longer requests: the floor is
 *   taken again from there, and it grows anew.
 */
export class AdaptiveConcurrency {
  private estimate: number;
  private smoothed: number | undefined;
  private samples = 0;
  private floor = Number.POSITIVE_INFINITY;
  private lastCutAt = Number.NEGATIVE_INFINITY;
  private slowStart = true;
  /** When the current rise of latency above floor × tolerance was first seen (epoch ms). */
  private riseSeenAt: number | undefined;
  private load: { value: EngineLoad; at: number } | undefined;
  private readonly tolerance: number;
  private readonly overloadBackoff: number;
  private readonly latencyBackoff: number;
  private readonly smoothing: number;
  private readonly kvUsageHigh: number;
  private readonly loadStaleMs: number;
  readonly ceiling: number;

  constructor(settings: AdaptiveConcurrencySettings) {
    if (!(Number.isFinite(settings.ceiling) && settings.ceiling >= 1)) throw new Error(`a concurrency ceiling must be at least 1, not ${settings.ceiling}`);
    this.ceiling = Math.floor(settings.ceiling);
    this.estimate = Math.min(this.ceiling, Math.max(1, settings.initial ?? 4));
    this.tolerance = settings.tolerance ?? 1.5;
    this.overloadBackoff = settings.overloadBackoff ?? 0.5;
    this.latencyBackoff = settings.latencyBackoff ?? 0.9;
    this.smoothing = settings.smoothing ?? 0.1;
    this.kvUsageHigh = settings.kvUsageHigh ?? 0.95;
    this.loadStaleMs = settings.loadStaleMs ?? 15_000;
  }

  /** Requests to allow in flight now: an integer from 1 to the ceiling. */
  get limit(): number {
    return Math.max(1, Math.min(this.ceiling, Math.floor(this.estimate)));
  }

  /** The latency floor learned so far, in ms (Infinity before enough answers). */
  get latencyFloorMs(): number {
    return this.floor;
  }

  record(result: RequestResult): void {
    const completedAt = result.startedAt + result.latencyMs;
    if (result.outcome === 'failed') return;
    if (result.outcome === 'overloaded' || result.outcome === 'timeout') {
      this.cut(this.overloadBackoff, result.startedAt, completedAt);
      return;
    }
    if (!(result.latencyMs >= 0)) return;
    this.smoothed = this.smoothed === undefined ? result.latencyMs : this.smoothed + this.smoothing * (result.latencyMs - this.smoothed);
    this.samples += 1;
    // The smoothed value needs about 1/smoothing samples before it stands for the mean.
    if (this.samples >= 1 / this.smoothing) this.floor = Math.min(this.floor, this.smoothed);

    const load = this.load && completedAt - this.load.at <= this.loadStaleMs ? this.load.value : undefined;
    if ((load?.waiting ?? 0) > 0) {
      this.cut(this.latencyBackoff, result.startedAt, completedAt);
      return;
    }
    const crowded = this.floor * this.tolerance;
    if (this.smoothed > crowded) {
      if (this.limit === 1 && result.startedAt >= this.lastCutAt) {
        this.floor = this.smoothed;
        this.slowStart = true;
        this.riseSeenAt = undefined;
      } else {
        this.riseSeenAt ??= completedAt;
        const confirmed = result.startedAt >= this.riseSeenAt && result.latencyMs > crowded;
        if (confirmed) this.cut(this.slowStart ? this.overloadBackoff : this.latencyBackoff, result.startedAt, completedAt);
        return;
      }
    } else {
      this.riseSeenAt = undefined;
    }
    // No growth before the floor is known: it must be measured at the small starting limit.
    if (!Number.isFinite(this.floor)) return;
    if ((load?.kvUsage ?? 0) >= this.kvUsageHigh) return;
    // Whether the limit was in use is judged against the limit of the time: in slow start it has
    // doubled by the time the answer comes, and judged against that it would look half used.
    if (result.inFlight < Math.ceil(0.9 * (result.limit ?? this.limit))) return;
    this.estimate = Math.min(this.ceiling, this.estimate + (this.slowStart ? 1 : 1 / this.estimate));
    // Growth stopped by the ceiling overshot nothing: a later rise is the engine's load changing.
    if (this.estimate >= this.ceiling) this.slowStart = false;
  }

  /** Load gauges scraped from the engine at `at` (see engineLoadFrom). */
  observeLoad(load: EngineLoad, at: number): void {
    this.load = { value: load, at };
  }

  private cut(factor: number, startedAt: number, completedAt: number): void {
    if (startedAt < this.lastCutAt) return;
    this.estimate = Math.max(1, this.estimate * factor);
    this.lastCutAt = completedAt;
    this.slowStart = false;
  }
}
