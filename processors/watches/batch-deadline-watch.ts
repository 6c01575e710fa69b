import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import type { BatchesQueries } from '../../projections/batches-projection.js';
import type { BatchLifecycle } from '../../src/application/batch-lifecycle.js';
import type { Clock } from '../../src/platform/clock.js';
import { RepeatingTask } from './repeating-task.js';
import { BatchRateTracker } from './batch-rate-tracker.js';

/**
 * Periodically estimates when each in-progress batch finishes at its current rate and flags one
 * that would finish past its expires_at (BatchDeadlineAtRisk). The progress samples behind the
 * recent rate live in memory: after a restart the rate since in progress stands in until the
 * window fills again. Several finalizer processors may watch at once; the batch's decider records
 * a flag only when the estimate slipped materially since the last one, so they add no repeats.
 */
export class BatchDeadlineWatch {
  private readonly task: RepeatingTask;
  private readonly rates = new BatchRateTracker();

  constructor(
    private readonly deps: {
      queries: BatchesQueries;
      batches: BatchLifecycle;
      clock: Clock;
      log: Pick<Logger, 'error' | 'warn'>;
      intervalMs: number;
    },
  ) {
    this.task = new RepeatingTask(() => this.look(), deps.intervalMs, (error) => this.deps.log.error({ err: error }, 'batch deadline check failed; it will run again'));
  }

  start(): void {
    this.task.start();
  }

  private async look(): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    const seen = new Set<string>();
    for (const batch of this.deps.queries.withStatus(['in_progress'])) {
      if (this.task.stopped) return;
      if (batch.expires_at === null || batch.in_progress_at === null || batch.stopping) continue;
      seen.add(batch.id);
      const lines_done = batch.completed + batch.failed;
      const estimate = this.rates.observe({ id: batch.id, in_progress_at: batch.in_progress_at, total: batch.total }, lines_done, now);
      if (!estimate || estimate.estimated_completion_at <= batch.expires_at) continue;
      const outcome = await this.deps.batches.run(batch.id, { type: 'FlagDeadlineRisk', ...estimate }, { correlationId: 'batch-deadline' });
      // Logged when recorded, not at every check: the decider already keeps repeats out.
      if (E.isRight(outcome) && outcome.right.events.length > 0) {
        this.deps.log.warn(
          {
            batch_id: batch.id,
            job_id: batch.job_id,
            estimated_completion_at: estimate.estimated_completion_at,
            expires_at: batch.expires_at,
            lines_per_second: estimate.lines_per_second,
            lines_done,
            lines_total: batch.total,
          },
          'batch will not finish before its deadline at its current rate',
        );
      }
    }
    this.rates.keepOnly(seen);
  }

  stop(): Promise<void> {
    return this.task.stop();
  }
}
