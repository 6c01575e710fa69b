import { parseStreamName } from '../src/domain/stream-names.js';
import type { AppliedEvents } from './history-feed.js';
import { historySubject } from './history-projection.js';

/**
 * What an event changed, as a subject a reader can fetch again: a batch (its own events and its
 * line outcomes alike), a file, a model's weight syncs, a webhook, a job or an account.
 */
export function changedSubject(streamName: string): string | undefined {
  const stream = parseStreamName(streamName);
  if (!stream) return undefined;
  if (stream.kind === 'job' || stream.kind === 'account') return `${stream.kind}:${stream.id}`;
  return historySubject(streamName);
}

/** How often a follower hears of what changed: often enough to look live, seldom enough that a large batch's outcomes make a handful of messages a second, not thousands. */
export const CHANGE_INTERVAL_MS = 200;

/**
 * Word of which subjects changed, as the read models take their events: the names only, gathered
 * over CHANGE_INTERVAL_MS, so that a page showing them fetches what changed from the read models
 * it already reads (and is never ahead of them).
 */
export class ChangeFeed {
  constructor(private readonly applied: AppliedEvents, private readonly intervalMs = CHANGE_INTERVAL_MS) {}

  /** Sets of changed subjects the follower may see (`visible`), until `signal` aborts. */
  async *follow(visible: (subject: string) => boolean, signal: AbortSignal): AsyncGenerator<string[]> {
    let changed = new Set<string>();
    let wake: (() => void) | undefined;
    // One batch of applied events is mostly one batch's line outcomes: the last stream's subject is
    // kept so that each of them costs a string comparison.
    let lastStream = '';
    let lastSubject: string | undefined;
    const stopListening = this.applied.onApplied((events) => {
      for (const event of events) {
        if (event.streamName !== lastStream) {
          lastStream = event.streamName;
          lastSubject = changedSubject(lastStream);
        }
        if (lastSubject !== undefined) changed.add(lastSubject);
      }
      if (changed.size > 0) wake?.();
    });
    const onAbort = () => wake?.();
    signal.addEventListener('abort', onAbort);
    try {
      while (!signal.aborted) {
        if (changed.size === 0) {
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
          continue;
        }
        const subjects = [...changed].filter(visible);
        changed = new Set();
        if (subjects.length > 0) yield subjects;
        // The pause between messages, cut short by the end; its listener goes with it, or a stream
        // open for hours would gather one on its signal every pause.
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            signal.removeEventListener('abort', done);
            resolve();
          };
          const timer = setTimeout(done, this.intervalMs);
          signal.addEventListener('abort', done);
        });
      }
    } finally {
      stopListening();
      signal.removeEventListener('abort', onAbort);
    }
  }
}
