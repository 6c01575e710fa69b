import type { RecordedEvent } from '../src/event-store/event-store.js';
import { type HistoryQueries, historySubject } from './history-projection.js';

/** What the feed needs of the projector: word of each batch of events the read models took. */
export interface AppliedEvents {
  onApplied(listener: (events: readonly RecordedEvent[]) => void): () => void;
}

/** Events read from the log per page: a long history (a batch of 50,000 lines) goes out in pages. */
const PAGE_SIZE = 500;

/**
 * A subject's history as it grows: the events after a cursor, in log order, then each later one
 * as soon as the read models hold it. It waits on the projector's word, not on a timer, and reads
 * through the same index as the paged list, so both give the same events in the same order.
 */
export class HistoryFeed {
  constructor(private readonly history: HistoryQueries, private readonly applied: AppliedEvents) {}

  /**
   * Pages of events, each non-empty, until `signal` aborts or the consumer stops asking. The
   * cursor (an event id of the subject, or undefined for the start) must be known to the history:
   * check it with HistoryQueries.knows first.
   */
  async *follow(subject: string, after: string | undefined, signal: AbortSignal): AsyncGenerator<RecordedEvent[]> {
    // Listening starts before the first read: an event applied while a page is read is not missed.
    let unread = true;
    let wake: (() => void) | undefined;
    const stopListening = this.applied.onApplied((events) => {
      if (!events.some((event) => historySubject(event.streamName) === subject)) return;
      unread = true;
      wake?.();
    });
    const onAbort = () => wake?.();
    signal.addEventListener('abort', onAbort);
    try {
      let cursor = after;
      while (!signal.aborted) {
        if (!unread) {
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
          continue;
        }
        unread = false;
        const page = await this.history.page(subject, PAGE_SIZE, cursor);
        if (!page) throw new Error(`the history of ${subject} has no event ${cursor ?? '(any)'} to follow from`);
        if (page.hasMore) unread = true;
        const last = page.events[page.events.length - 1];
        if (!last || signal.aborted) continue;
        cursor = last.id;
        yield page.events;
      }
    } finally {
      stopListening();
      signal.removeEventListener('abort', onAbort);
    }
  }
}
