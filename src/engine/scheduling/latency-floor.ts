/** The answers of one window: their mean latency, its spread. */
interface WindowSummary {
  readonly count: number;
  readonly mean: number;
  /** Standard deviation of its answers' latencies. */
  readonly deviation: number;
}

/**
 * An engine's latency when it is not crowded: the lowest mean of the recent windows of answers.
 * Not what the concurrency limit is learned from (a batching engine's latency rises with its
 * batch: see EngineCapacity), but what tells how long work may be held ahead of a replica
 * (ReplicaPool's hold-ahead) and how much later than uncrowded an interactive request came (the
 * yield to other processes' interactive requests).
 */
export class LatencyFloor {
  private count = 0;
  private sum = 0;
  private sumOfSquares = 0;
  private recent: WindowSummary[] = [];
  private lowestWindow: WindowSummary | undefined;

  constructor(
    /** Answers a window holds. */
    private readonly windowAnswers = 16,
    /** Windows the floor is the lowest of: recent ones only, since the lowest of ever more noisy means drifts below any true floor. */
    private readonly windows = 30,
  ) {}

  add(latencyMs: number): void {
    if (!(latencyMs >= 0)) return;
    this.count += 1;
    this.sum += latencyMs;
    this.sumOfSquares += latencyMs * latencyMs;
    if (this.count < this.windowAnswers) return;
    const mean = this.sum / this.count;
    const variance = Math.max(0, (this.sumOfSquares - this.count * mean * mean) / (this.count - 1));
    this.recent.push({ count: this.count, mean, deviation: Math.sqrt(variance) });
    if (this.recent.length > this.windows) this.recent.shift();
    this.count = this.sum = this.sumOfSquares = 0;
    // Found when a window closes, not at each read: the pool reads the floor two or three times a batch line.
    this.lowestWindow = undefined;
    for (const window of this.recent) if (!this.lowestWindow || window.mean < this.lowestWindow.mean) this.lowestWindow = window;
  }

  /** The lowest recent window mean, ms (Infinity before the first window). */
  get floorMs(): number {
    return this.lowestWindow?.mean ?? Number.POSITIVE_INFINITY;
  }

  /**
   * The mean latency of an uncrowded window, ms: the floor less the bias of being the lowest of
   * the recent window means, which lies about √(2 ln K) standard errors below what they measure.
   */
  get uncrowdedMs(): number {
    const floor = this.lowestWindow;
    if (!floor) return Number.POSITIVE_INFINITY;
    const lowestBias = Math.sqrt(2 * Math.log(Math.max(2, this.recent.length)));
    return floor.mean + (lowestBias * floor.deviation) / Math.sqrt(floor.count);
  }

  /** The spread of latencies relative to their mean in the latest window (0 before the first). */
  get variation(): number {
    const latest = this.recent.at(-1);
    return latest && latest.mean > 0 ? latest.deviation / latest.mean : 0;
  }
}
