// When a running batch will finish at the rate it is going: the basis of its deadline-risk flag.
import type { DeadlineRiskEstimate } from './batch.js';

/** Lines settled (completed or failed) as seen at a moment (Unix seconds). */
export interface ProgressSample {
  readonly at: number;
  readonly done: number;
}

/**
 * Fewer settled lines than this say too little about a rate: one slow or lucky line would decide
 * the estimate alone.
 */
export const MIN_LINES_TO_ESTIMATE = 2;

/**
 * The samples a rate over the last `windowSeconds` needs, oldest first: those inside the window,
 * and the newest one before it, which anchors the window's start.
 */
export function keepRateWindow(samples: readonly ProgressSample[], now: number, windowSeconds: number): ProgressSample[] {
  const start = now - windowSeconds;
  const firstInside = samples.findIndex((sample) => sample.at > start);
  if (firstInside === -1) return samples.slice(-1);
  return samples.slice(Math.max(0, firstInside - 1));
}

/**
 * The batch's completion at its recent rate (over `window`, oldest sample first) when enough lines
 * settled there, else at its rate since it went in progress: a batch that stalls thus still gets an
 * estimate, later and later as the stall drags that rate down. Undefined when too few lines
 * settled, no time passed, or nothing is left to run.
 */
export function estimateCompletion(progress: {
  readonly now: number;
  readonly in_progress_at: number;
  readonly lines_done: number;
  readonly lines_total: number;
  readonly window: readonly ProgressSample[];
}): DeadlineRiskEstimate | undefined {
  const { now, lines_done, lines_total } = progress;
  if (lines_done >= lines_total) return undefined;
  const anchor = progress.window[0];
  const rate =
    anchor && now > anchor.at && lines_done - anchor.done >= MIN_LINES_TO_ESTIMATE
      ? (lines_done - anchor.done) / (now - anchor.at)
      : lines_done >= MIN_LINES_TO_ESTIMATE && now > progress.in_progress_at
        ? lines_done / (now - progress.in_progress_at)
        : undefined;
  if (rate === undefined) return undefined;
  return { at: now, estimated_completion_at: now + Math.ceil((lines_total - lines_done) / rate), lines_done, lines_total, lines_per_second: rate };
}
