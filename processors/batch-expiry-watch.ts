import type { Logger } from 'pino';
import type { BatchesQueries } from '../projections/batches-projection.js';
import type { BatchLifecycle } from '../src/application/batch-lifecycle.js';
import type { Clock } from '../src/clock.js';
import { STOPPABLE_STATUSES } from '../src/domain/batch.js';

/**
 * Time is not an event: once a second, batches past their expires_at start winding down. Several
 * finalizer processors may watch at once; the batch's decider lets only the first start count.
 */
export class BatchExpiryWatch {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly deps: { queries: BatchesQueries; batches: BatchLifecycle; clock: Clock; log: Pick<Logger, 'error'>; intervalMs: number },
  ) {}

  start(): void {
    this.stopped = false;
    const tick = () => {
      this.running = this.look().catch((error: unknown) => this.deps.log.error({ err: error }, 'batch expiry check failed; it will run again'));
      void this.running.then(() => {
        if (!this.stopped) this.timer = setTimeout(tick, this.deps.intervalMs).unref();
      });
    };
    tick();
  }

  private async look(): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    for (const batch of this.deps.queries.withStatus(STOPPABLE_STATUSES)) {
      if (this.stopped) return;
      if (batch.expires_at === null || batch.expires_at > now || batch.stopping) continue;
      await this.deps.batches.run(batch.id, { type: 'StartExpiry', at: now }, { correlationId: 'batch-expiry' });
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
