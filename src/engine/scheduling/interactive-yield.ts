import type { EngineCapacity } from './engine-capacity.js';

// Yielding to another process's interactive requests, on the scaled-out shape where the API and
// the inference processors share engines but not a scheduler: the API measures how long its
// interactive requests queued inside the engine (InteractiveQueueing) and reports it with its
// load; each inference processor's replica gives a slot back once the reports say they keep
// queueing (ReplicaYield).

/**
 * Interactive requests answered this much later than the engine's uncrowded latency (the median of
 * a report's), in `reports` reports in a row, waited inside it for a slot: 4 ms, or 4% of the
 * latency for long requests. With a slot free the medians of one second's 20 requests came 0 to
 * 2 ms above it, now and then a second 3 to 5 ms; with every slot taken, 2 to 20 ms, most seconds
 * above 4 (bench/FINDINGS.md).
 */
const INTERACTIVE_QUEUE_SLACK = { ms: 4, ofFloor: 0.04, reports: 2 };
/** The least time between two slots a replica gives back: a report reflects the last one a second or two later. */
const YIELD_GAP_MS = 3_000;
/** Interactive answers a queueing report needs (fewer say nothing), and the most kept between reports. */
const QUEUEING_SAMPLES = { least: 5, most: 2_000 };

/** How much later than their replica's uncrowded latency this process's interactive requests were answered. */
export class InteractiveQueueing {
  /** Since median() was last asked, ms above the uncrowded latency, one per answer. */
  private excess: number[] = [];

  /**
   * An interactive request answered in `latencyMs` by a replica whose uncrowded latency is
   * `uncrowdedMs` (Infinity while unknown: the answer says nothing yet).
   */
  answered(latencyMs: number, uncrowdedMs: number): void {
    if (this.excess.length < QUEUEING_SAMPLES.most && Number.isFinite(uncrowdedMs)) this.excess.push(latencyMs - uncrowdedMs);
  }

  /** The median since the last call (ms); undefined with too few answers. Each call starts anew. */
  median(): number | undefined {
    const samples = this.excess;
    this.excess = [];
    if (samples.length < QUEUEING_SAMPLES.least) return undefined;
    samples.sort((a, b) => a - b);
    const middle = samples.length >> 1;
    return samples.length % 2 === 1 ? samples[middle]! : (samples[middle - 1]! + samples[middle]!) / 2;
  }
}

/** One replica's side: the reports in a row that say interactive requests queue, and when it last gave a slot back. */
export class ReplicaYield {
  private yieldedAt = Number.NEGATIVE_INFINITY;
  /** Per API process, its reports in a row of interactive requests queueing above the slack. */
  private readonly queueingReports = new Map<string, number>();

  constructor(private readonly capacity: Pick<EngineCapacity, 'latencyFloorMs' | 'yieldSlot'>) {}

  /**
   * A report from API process `source` that its interactive requests were answered `queuedMs`
   * later than uncrowded (undefined: too few answers to say). Once queueing persists, one slot
   * back (EngineCapacity.yieldSlot), at most one per YIELD_GAP_MS, and only when
   * `fillsItsShare()`: work this process holds back is all that can make room, so a replica it
   * hardly uses is not the cause.
   */
  report(source: string, queuedMs: number | undefined, now: number, fillsItsShare: () => boolean): void {
    const floor = this.capacity.latencyFloorMs;
    const slack = Math.max(INTERACTIVE_QUEUE_SLACK.ms, Number.isFinite(floor) ? INTERACTIVE_QUEUE_SLACK.ofFloor * floor : 0);
    // In a row from one API process: a report without the figure (too few answers) breaks the row.
    const inRow = queuedMs !== undefined && queuedMs > slack ? (this.queueingReports.get(source) ?? 0) + 1 : 0;
    if (inRow > 0) this.queueingReports.set(source, inRow);
    else this.queueingReports.delete(source);
    if (inRow < INTERACTIVE_QUEUE_SLACK.reports || now - this.yieldedAt < YIELD_GAP_MS) return;
    if (!fillsItsShare()) return;
    if (this.capacity.yieldSlot(now)) this.yieldedAt = now;
  }
}
