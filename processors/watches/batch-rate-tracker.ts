import type { DeadlineRiskEstimate } from '../../src/domain/batch.js';
import { type ProgressSample, estimateCompletion, keepRateWindow } from '../../src/domain/completion-estimate.js';

/**
 * The recent rate is measured over this long: long enough that a chunk's burst of outcomes does
 * not read as the batch's pace, short enough that a slowdown shows within minutes.
 */
export const RATE_WINDOW_SECONDS = 600;

/**
 * Each in-progress batch's recent progress, kept in memory, and its completion estimate from it.
 * After a restart the rate since in progress stands in until the window fills again.
 */
export class BatchRateTracker {
  private readonly samples = new Map<string, ProgressSample[]>();

  /** Records the batch's count at `now` and estimates when it finishes; undefined when it cannot yet. */
  observe(batch: { readonly id: string; readonly in_progress_at: number; readonly total: number }, linesDone: number, now: number): DeadlineRiskEstimate | undefined {
    const window = keepRateWindow(this.samples.get(batch.id) ?? [], now, RATE_WINDOW_SECONDS);
    const estimate = estimateCompletion({ now, in_progress_at: batch.in_progress_at, lines_done: linesDone, lines_total: batch.total, window });
    // One sample per clock second: the latest count stands for it.
    if (window.at(-1)?.at === now) window.pop();
    window.push({ at: now, done: linesDone });
    this.samples.set(batch.id, window);
    return estimate;
  }

  /** Forgets the batches not in `running` (finished, or no longer watched). */
  keepOnly(running: ReadonlySet<string>): void {
    for (const id of this.samples.keys()) if (!running.has(id)) this.samples.delete(id);
  }
}
