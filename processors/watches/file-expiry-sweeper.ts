import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import type { FileRegistry } from '../../src/application/file-registry.js';
import type { Clock } from '../../src/platform/clock.js';
import type { FilesQueries } from '../../projections/files-projection.js';
import { RepeatingTask } from './repeating-task.js';

const PAGE = 100;

/**
 * Records FileExpired for every file past its expires_at and removes its content. Several
 * sweepers may run at once (one per API process): the event store's optimistic concurrency lets
 * exactly one of them expire a given file, and the others see it already gone.
 */
export class FileExpirySweeper {
  private readonly task: RepeatingTask;

  constructor(
    private readonly deps: { files: FileRegistry; queries: FilesQueries; clock: Clock; log: Pick<Logger, 'info' | 'error'> },
    intervalMs: number,
  ) {
    this.task = new RepeatingTask(() => this.sweepOnce(), intervalMs, (error) => this.deps.log.error({ err: error }, 'file expiry sweep failed'));
  }

  start(): void {
    this.task.start();
  }

  /** Expires every file that is due now; returns how many this sweeper expired. */
  async sweepOnce(): Promise<number> {
    let expired = 0;
    const skipped = new Set<string>();
    for (;;) {
      const due = this.deps.queries.dueForExpiry(this.deps.clock.nowSeconds(), PAGE + skipped.size).filter((file) => !skipped.has(file.id));
      if (due.length === 0) return expired;
      for (const file of due) {
        const outcome = await this.deps.files.expire(file.id, { correlationId: 'file-expiry-sweeper' });
        if (E.isRight(outcome)) expired += 1;
        else skipped.add(file.id); // already deleted or expired by someone else; the read model will catch up
      }
      if (expired > 0) this.deps.log.info({ expired }, 'expired files swept');
    }
  }

  stop(): Promise<void> {
    return this.task.stop();
  }
}
