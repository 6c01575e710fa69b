import type { EventEmitter } from 'node:events';
import type { EventBatchHandler, Position, RecordedEvent, Subscription } from './event-store.js';

/**
 * A catch-up subscription over a log read in pages (the SQLite and PostgreSQL stores): reads the
 * page after its cursor, hands it to the handler and waits for it, moves on; once caught up, waits
 * for `appended` (emitted when the log may have grown) or at most `idleMs`, then reads again.
 */
export function pollingSubscription(options: {
  after?: Position | undefined;
  /** The page of events after `after` (empty when caught up). */
  read: (after: Position | undefined) => readonly RecordedEvent[] | Promise<readonly RecordedEvent[]>;
  handler: EventBatchHandler;
  appended: EventEmitter;
  idleMs: number;
  /** A read failing so is tried again after a delay doubling from retryMs[0] to retryMs[1]; any other failure ends the subscription. */
  retryable?: (error: unknown) => boolean;
  retryMs?: readonly [number, number];
  /** Called as it stops. */
  onStop?: () => void;
}): Subscription {
  const { read, handler, appended, idleMs, retryable, retryMs = [100, 5_000] } = options;
  let stopped = false;
  let wake: (() => void) | undefined;
  /** Set by a wake that came while a page was being read: the next empty page is read again, not waited on. */
  let woken = false;
  const waitForAppend = (ms: number) =>
    new Promise<void>((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        appended.off('appended', finish);
        wake = undefined;
        resolve();
      };
      const timer = setTimeout(finish, ms);
      appended.once('appended', finish);
      wake = finish;
    });

  const run = async () => {
    let cursor = options.after;
    let retryDelay = retryMs[0];
    while (!stopped) {
      let batch: readonly RecordedEvent[];
      woken = false;
      try {
        batch = await read(cursor);
        retryDelay = retryMs[0];
      } catch (error) {
        if (stopped || !retryable?.(error)) throw error;
        // The server restarted or the network went away: the same page again once it is back.
        await waitForAppend(retryDelay);
        retryDelay = Math.min(retryMs[1], retryDelay * 2);
        continue;
      }
      if (batch.length === 0) {
        if (!woken) await waitForAppend(idleMs);
        continue;
      }
      await handler(batch);
      cursor = batch[batch.length - 1]!.position;
    }
  };
  const done = run();
  return {
    done,
    stop: async () => {
      stopped = true;
      wake?.();
      options.onStop?.();
      await done.catch(() => undefined);
    },
    // Ends a wait for `appended` or the next poll; one that comes while a page is read has the
    // next empty page read again (the event may have been committed after the read began).
    wake: () => {
      woken = true;
      wake?.();
    },
  };
}
