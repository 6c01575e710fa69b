import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ChangeFeed, changedSubject } from '../projections/change-feed.js';
import type { AppliedEvents } from '../projections/history-feed.js';
import type { RecordedEvent } from '../src/event-store/event-store.js';

/** The projector's word of applied events, played by hand: who listens, and what they are told. */
class Applied implements AppliedEvents {
  readonly listeners = new Set<(events: readonly RecordedEvent[]) => void>();
  onApplied(listener: (events: readonly RecordedEvent[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  apply(...streams: string[]): void {
    const events = streams.map((streamName) => ({ streamName }) as RecordedEvent);
    for (const listener of this.listeners) listener(events);
  }
}

describe('the change feed', () => {
  it('names each stream by the subject a reader fetches again', () => {
    expect(changedSubject('batch-batch_0123456789abcdef01234567')).toBe('batch:batch_0123456789abcdef01234567');
    expect(changedSubject('batchlines-batch_0123456789abcdef01234567-3')).toBe('batch:batch_0123456789abcdef01234567');
    expect(changedSubject('file-file-0123456789abcdef01234567')).toBe('file:file-0123456789abcdef01234567');
    expect(changedSubject('weights-spool-tiny')).toBe('weights:spool-tiny');
    expect(changedSubject('job-job-demo')).toBe('job:job-demo');
    expect(changedSubject('account-north')).toBe('account:north');
    expect(changedSubject('something-else')).toBeUndefined();
  });

  it('gathers what changed over its interval, once a subject, only what the follower may see, and lets go when stopped', async () => {
    const applied = new Applied();
    const feed = new ChangeFeed(applied, 50);
    const stop = new AbortController();
    const messages = feed.follow((subject) => !subject.startsWith('file:'), stop.signal);
    const first = messages.next();
    await new Promise((resolve) => setTimeout(resolve, 0));
    applied.apply('batch-batch_a', 'batchlines-batch_a-0', 'batchlines-batch_a-1', 'file-file-x');
    expect((await first).value).toEqual(['batch:batch_a']);
    // During the pause: many outcomes of two batches make one message.
    const second = messages.next();
    for (let i = 0; i < 100; i++) applied.apply(`batchlines-batch_a-${i % 4}`, 'batch-batch_b');
    expect((await second).value).toEqual(['batch:batch_a', 'batch:batch_b']);
    // Many pauses leave no listener behind on the signal.
    for (let i = 0; i < 5; i++) {
      const next = messages.next();
      applied.apply('batch-batch_c');
      await next;
    }
    expect(getEventListeners(stop.signal, 'abort').length).toBeLessThanOrEqual(1);
    const last = messages.next();
    stop.abort();
    expect((await last).done).toBe(true);
    expect(applied.listeners.size).toBe(0);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  });
});
