/** The answers of one window: their mean latency, its spread, and the mean in flight. */
export class LatencyWindow {
  count = 0;
  private sum = 0;
  private sumOfSquares = 0;
  private inFlightSum = 0;

  add(latencyMs: number, inFlight: number): void {
    this.count += 1;
    this.sum += latencyMs;
    this.sumOfSquares += latencyMs * latencyMs;
    this.inFlightSum += inFlight;
  }

  summary(): WindowSummary {
    const mean = this.sum / this.count;
    const variance = this.count > 1 ? Math.max(0, (this.sumOfSquares - this.count * mean * mean) / (this.count - 1)) : 0;
    return { count: this.count, mean, deviation: Math.sqrt(variance), inFlight: this.inFlightSum / this.count };
  }
}

export interface WindowSummary {
  readonly count: number;
  readonly mean: number;
  /** Standard deviation of its answers' latencies. */
  readonly deviation: number;
  /** Mean requests in flight when its answers were sent. */
  readonly inFlight: number;
}
