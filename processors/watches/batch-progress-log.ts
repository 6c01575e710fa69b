import type { Logger } from 'pino';
import type { BatchesQueries } from '../../projections/batches-projection.js';
import type { Clock } from '../../src/platform/clock.js';
import { BatchRateTracker } from './batch-rate-tracker.js';
import { RepeatingTask } from './repeating-task.js';

/** A batch whose counts do not move still gets a line this often, so a stall shows in the logs without filling them. */
export const STALLED_LINE_SECONDS = 60;

interface LastLine {
  readonly at: number;
  readonly done: number;
  readonly failed: number;
}

/**
 * Logs, every `intervalMs`, one info line per in-progress batch whose counts moved since its last
 * line: lines done of total, failures, the recent rate and when the batch finishes at it. Reads
 * the batches read model only; the rate window and the last lines live in memory, so after a
 * restart the rate since in progress stands in until the window fills again.
 */
export class BatchProgressLog {
  private readonly task: RepeatingTask;
  private readonly rates = new BatchRateTracker();
  private readonly lastLines = new Map<string, LastLine>();

  constructor(
    private readonly deps: {
      queries: BatchesQueries;
      clock: Clock;
      log: Pick<Logger, 'info' | 'error'>;
      intervalMs: number;
    },
  ) {
    this.task = new RepeatingTask(async () => this.look(), deps.intervalMs, (error) => this.deps.log.error({ err: error }, 'batch progress log failed; it will run again'));
  }

  start(): void {
    this.task.start();
  }

  stop(): Promise<void> {
    return this.task.stop();
  }

  // Synchronous over one reading of the read model: no batch's summary line can slip in between
  // reading it as in progress and logging its progress.
  private look(): void {
    const now = this.deps.clock.nowSeconds();
    const seen = new Set<string>();
    for (const batch of this.deps.queries.withStatus(['in_progress'])) {
      if (batch.in_progress_at === null) continue;
      seen.add(batch.id);
      const lines_done = batch.completed + batch.failed;
      const estimate = this.rates.observe({ id: batch.id, in_progress_at: batch.in_progress_at, total: batch.total }, lines_done, now);

      const last = this.lastLines.get(batch.id);
      const moved = !last || last.done !== lines_done || last.failed !== batch.failed;
      if (!moved && now - last.at < STALLED_LINE_SECONDS) continue;
      this.lastLines.set(batch.id, { at: now, done: lines_done, failed: batch.failed });

      const rate = estimate === undefined ? null : Math.round(estimate.lines_per_second * 100) / 100;
      const secondsLeft = estimate === undefined ? null : estimate.estimated_completion_at - now;
      const pace = estimate === undefined ? '' : `, ${rate} lines/s, about ${secondsLeft}s left`;
      this.deps.log.info(
        {
          batch_id: batch.id,
          job_id: batch.job_id,
          lines_done,
          lines_total: batch.total,
          failed: batch.failed,
          lines_per_second: rate,
          estimated_completion_at: estimate === undefined ? null : new Date(estimate.estimated_completion_at * 1000).toISOString(),
          seconds_left: secondsLeft,
        },
        `batch progress: ${lines_done} of ${batch.total} lines done, ${batch.failed} failed${pace}`,
      );
    }
    this.rates.keepOnly(seen);
    for (const id of this.lastLines.keys()) if (!seen.has(id)) this.lastLines.delete(id);
  }
}
