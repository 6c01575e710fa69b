import type { Logger } from 'pino';
import type { BatchLifecycle } from '../src/application/batch-lifecycle.js';
import type { Clock } from '../src/clock.js';
import type { BatchesQueries } from '../projections/batches-projection.js';
import type { BatchFinalizer } from './batch-finalizer.js';
import { readyToFinalize } from './batch-finalizer.js';
import type { BatchRunner } from './batch-runner.js';
import type { BatchValidator } from './batch-validator.js';

/**
 * Drives batches forward from what the read models say, not from remembered messages: after each
 * projected change and on a timer, it looks for batches to validate, chunks to run, batches to
 * finalize and batches past their expires_at. A restart therefore picks up every batch where the
 * log left it, and running any step twice is harmless.
 */
export class BatchPipeline {
  private timer: NodeJS.Timeout | undefined;
  private scheduled = false;
  private stopped = false;
  private readonly busy = new Map<string, Promise<void>>();

  constructor(
    private readonly deps: {
      queries: BatchesQueries;
      batches: BatchLifecycle;
      validator: BatchValidator;
      runner: BatchRunner;
      finalizer: BatchFinalizer;
      clock: Clock;
      log: Pick<Logger, 'error'>;
      tickMs: number;
    },
  ) {}

  start(): void {
    this.stopped = false;
    const tick = () => {
      this.kick();
      if (!this.stopped) this.timer = setTimeout(tick, this.deps.tickMs).unref();
    };
    tick();
  }

  /** Schedules one look at the read models (many kicks in a row make one look). */
  kick(): void {
    if (this.scheduled || this.stopped) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (!this.stopped) this.look();
    });
  }

  private look(): void {
    const { queries, clock } = this.deps;
    const now = clock.nowSeconds();
    for (const batch of queries.withStatus(['validating', 'in_progress', 'finalizing', 'cancelling'])) {
      if (batch.expires_at !== null && batch.expires_at <= now && !batch.stopping && (batch.status === 'validating' || batch.status === 'in_progress')) {
        this.once(`expire:${batch.id}`, () => this.deps.batches.run(batch.id, { type: 'StartExpiry', at: now }, { correlationId: 'batch-expiry' }).then(() => undefined));
      } else if (batch.status === 'validating' && !batch.stopping) {
        this.once(`validate:${batch.id}`, () => this.deps.validator.validate(batch.id));
      } else if (readyToFinalize(batch)) {
        this.once(`finalize:${batch.id}`, () => this.deps.finalizer.finalize(batch.id));
      }
    }
    this.deps.runner.dispatch(queries.unsettledChunks());
  }

  /** Runs a step unless the same step is running; looks again when it succeeds. */
  private once(key: string, step: () => Promise<void>): void {
    if (this.busy.has(key)) return;
    const run = step()
      .then(
        () => this.kick(),
        // Retried on the next tick, not at once: a failing dependency is not hammered.
        (error: unknown) => this.deps.log.error({ err: error, step: key }, 'batch step failed; it will be retried'),
      )
      .finally(() => this.busy.delete(key));
    this.busy.set(key, run);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.deps.runner.stop();
    await Promise.allSettled([...this.busy.values()]);
  }
}
