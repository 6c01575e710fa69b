import type { Logger } from 'pino';
import type { BatchesQueries } from '../../projections/batches-projection.js';
import type { BatchLifecycle } from '../../src/application/batch-lifecycle.js';
import type { Clock } from '../../src/platform/clock.js';
import { RepeatingTask } from './repeating-task.js';
import { STOPPABLE_STATUSES } from '../../src/domain/batch.js';

/**
 * Time is not an event: once a second, batches past their expires_at start winding down. Several
 * finalizer processors may watch at once; the batch's decider lets only the first start count.
 */
export class BatchExpiryWatch {
  private readonly task: RepeatingTask;

  constructor(
    private readonly deps: { queries: BatchesQueries; batches: BatchLifecycle; clock: Clock; log: Pick<Logger, 'error'>; intervalMs: number },
  ) {
    this.task = new RepeatingTask(() => this.look(), deps.intervalMs, (error) => this.deps.log.error({ err: error }, 'batch expiry check failed; it will run again'));
  }

  start(): void {
    this.task.start();
  }

  private async look(): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    for (const batch of this.deps.queries.withStatus(STOPPABLE_STATUSES)) {
      if (this.task.stopped) return;
      if (batch.expires_at === null || batch.expires_at > now || batch.stopping) continue;
      await this.deps.batches.run(batch.id, { type: 'StartExpiry', at: now }, { correlationId: 'batch-expiry' });
    }
  }

  stop(): Promise<void> {
    return this.task.stop();
  }
}
