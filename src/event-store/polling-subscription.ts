import type { EventEmitter } from 'node:events';
import { type EventBatchHandler, type Position, type RecordedEvent, type Subscription, comparePositions } from './event-store.js';

/**
 * The event a store's `appended` emitter sends when the log may have grown: with the newest
 * position a commit made readable where the store knows it, with none where it does not (another
 * process's commit heard of without its position).
 */
type AppendedListener = (newest?: Position) => void;

/**
 * A catch-up subscription over a log read in pages (the SQLite and PostgreSQL stores): reads the
 * page after its cursor, hands it to the handler and waits for it, moves on; once caught up, waits
 * for `appended` (emitted when the log may have grown) or at most `idleMs`, then reads again.
 *
 * What it hears is kept while it reads and hands a page on, not only while it waits: a commit
 * heard of then, past what the page held, is read at once, not at the next poll (up to a second
 * away on PostgreSQL). A commit heard of at or below what it has read (its own process's append
 * echoed by the server, say) wakes nothing, and a page shorter than `pageSize` says it is caught
 * up, so it waits without asking once more for the nothing after it.
 */
export function pollingSubscription(options: {
  after?: Position | undefined;
  /** The page of events after `after` (empty when caught up). */
  read: (after: Position | undefined) => readonly RecordedEvent[] | Promise<readonly RecordedEvent[]>;
  /** How many events `read` gives at most: a shorter page holds everything readable when it was read. */
  pageSize?: number;
  handler: EventBatchHandler;
  appended: EventEmitter;
  idleMs: number;
  /** A read failing so is tried again after a delay doubling from retryMs[0] to retryMs[1]; any other failure ends the subscription. */
  retryable?: (error: unknown) => boolean;
  retryMs?: readonly [number, number];
  /** Called as it stops. */
  onStop?: () => void;
}): Subscription {
  const { read, pageSize, handler, appended, idleMs, retryable, retryMs = [100, 5_000] } = options;
  let stopped = false;
  let cursor = options.after;
  let wake: (() => void) | undefined;
  /**
   * What was heard of since the last read began: the newest position, 'unknown' for a commit
   * heard of without one, or 'asked' for a wake() (someone knows of an event: read, whatever the
   * cursor says). Cleared as a read begins, which sees every commit heard of before it.
   */
  let heard: Position | 'unknown' | 'asked' | undefined;
  const news = (): boolean => heard === 'unknown' || heard === 'asked' || (heard !== undefined && (cursor === undefined || comparePositions(heard, cursor) > 0));
  const hear: AppendedListener = (newest) => {
    if (heard === 'unknown' || heard === 'asked') return;
    if (newest === undefined) heard = 'unknown';
    else if (heard === undefined || comparePositions(newest, heard) > 0) heard = newest;
    if (news()) wake?.();
  };
  appended.on('appended', hear);
  const waitForNews = (ms: number) =>
    new Promise<void>((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      };
      const timer = setTimeout(finish, ms);
      wake = finish;
    });

  const run = async () => {
    let retryDelay = retryMs[0];
    while (!stopped) {
      let batch: readonly RecordedEvent[];
      heard = undefined;
      try {
        batch = await read(cursor);
        retryDelay = retryMs[0];
      } catch (error) {
        if (stopped || !retryable?.(error)) throw error;
        // The server restarted or the network went away: the same page again once it is back.
        await waitForNews(retryDelay);
        retryDelay = Math.min(retryMs[1], retryDelay * 2);
        continue;
      }
      if (batch.length > 0) {
        await handler(batch);
        cursor = batch[batch.length - 1]!.position;
        // A full page: more may follow at once.
        if (pageSize === undefined || batch.length >= pageSize) continue;
      }
      if (stopped || news()) continue;
      await waitForNews(idleMs);
    }
  };
  const done = run().finally(() => appended.off('appended', hear));
  return {
    done,
    stop: async () => {
      stopped = true;
      wake?.();
      options.onStop?.();
      await done.catch(() => undefined);
    },
    // Ends a wait for `appended` or the next poll; one that comes while a page is read or handed
    // on has the log read again after it (the event may have been committed after the read began).
    wake: () => {
      heard = 'asked';
      wake?.();
    },
  };
}
