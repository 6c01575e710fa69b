import { describe, expect, it } from 'vitest';
import { AdaptiveConcurrency, type RequestOutcome } from '../src/engine/adaptive-concurrency.js';

/** Feeds `count` results that each started at a full limit, one latency apart per limit's worth. */
function feed(limiter: AdaptiveConcurrency, clock: { t: number }, count: number, latencyMs: number, outcome: RequestOutcome = 'answered') {
  for (let i = 0; i < count; i++) {
    const startedAt = clock.t;
    clock.t += latencyMs / Math.max(1, limiter.limit);
    limiter.record({ startedAt, latencyMs, outcome, inFlight: limiter.limit });
  }
}

/** A saturated replica: every request starts with the limit in flight; latency from the engine model. */
function drive(limiter: AdaptiveConcurrency, clock: { t: number }, count: number, latencyAt: (inFlight: number) => number): number[] {
  const seen: number[] = [];
  for (let i = 0; i < count; i++) {
    const inFlight = limiter.limit;
    const startedAt = clock.t;
    const latencyMs = latencyAt(inFlight);
    clock.t += latencyMs / inFlight;
    limiter.record({ startedAt, latencyMs, outcome: 'answered', inFlight });
    seen.push(limiter.limit);
  }
  return seen;
}

describe('adaptive concurrency', () => {
  it('grows while latency stays at its floor, up to the ceiling and never past it', () => {
    const limiter = new AdaptiveConcurrency({ ceiling: 32 });
    const clock = { t: 0 };
    expect(limiter.limit).toBeLessThan(32);
    const seen: number[] = [];
    for (let round = 0; round < 200; round++) {
      feed(limiter, clock, 5, 100);
      seen.push(limiter.limit);
    }
    expect(limiter.limit).toBe(32);
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThanOrEqual(seen[i - 1]!);
    expect(Math.max(...seen)).toBe(32);
  });

  it('doubles per round trip in slow start: each answer to a request sent at the full limit of its time adds one', () => {
    const limiter = new AdaptiveConcurrency({ ceiling: 128 });
    let rounds = 0;
    for (let t = 0; limiter.limit < 128 && rounds < 100; t += 100, rounds++) {
      // A round trip: the whole limit sent at once, all answered 100 ms later.
      const limit = limiter.limit;
      for (let i = 0; i < limit; i++) limiter.record({ startedAt: t, latencyMs: 100, outcome: 'answered', inFlight: limit, limit });
    }
    // Three round trips at 4 to learn the floor, then 4 → 8 → … → 128.
    expect(rounds).toBeLessThanOrEqual(9);
  });

  it('does not grow when the limit is not being used (no evidence the engine can take more)', () => {
    const limiter = new AdaptiveConcurrency({ ceiling: 64, initial: 4 });
    for (let i = 0; i < 1000; i++) limiter.record({ startedAt: i * 10, latencyMs: 100, outcome: 'answered', inFlight: 1 });
    expect(limiter.limit).toBe(4);
  });

  it('learns an engine’s useful concurrency from latency rising above its floor, and follows it down', () => {
    // An engine that serves 8 at once: beyond that, requests wait inside it and latency grows.
    const engine = { slots: 8 };
    const latencyAt = (inFlight: number) => 100 * Math.max(1, inFlight / engine.slots);
    const limiter = new AdaptiveConcurrency({ ceiling: 64 });
    const clock = { t: 0 };
    const seen = drive(limiter, clock, 3000, latencyAt);
    expect(Math.max(...seen)).toBeLessThanOrEqual(32);
    expect(limiter.limit).toBeGreaterThanOrEqual(8);
    // Latency tolerated up to 1.5 × its floor: at most about 1.5 × the engine's slots.
    expect(limiter.limit).toBeLessThanOrEqual(13);
    // Another tenant takes half the engine: the limit follows.
    engine.slots = 4;
    drive(limiter, clock, 3000, latencyAt);
    expect(limiter.limit).toBeGreaterThanOrEqual(4);
    expect(limiter.limit).toBeLessThanOrEqual(7);
  });

  it('never goes below 1; a rise that shrinking does not cure (the requests got longer) becomes the new floor', () => {
    const limiter = new AdaptiveConcurrency({ ceiling: 32 });
    const clock = { t: 0 };
    drive(limiter, clock, 1000, () => 100);
    expect(limiter.limit).toBe(32);
    const seen = drive(limiter, clock, 3000, () => 1000);
    expect(Math.min(...seen)).toBe(1);
    expect(limiter.limit).toBe(32);
  });

  it('does not shrink for latency that merely varies around its mean (long and short requests)', () => {
    const limiter = new AdaptiveConcurrency({ ceiling: 32 });
    let t = 0;
    for (let i = 0; i < 5000; i++) {
      const latencyMs = i % 4 === 0 ? 300 : 60; // one long request in four
      limiter.record({ startedAt: t, latencyMs, outcome: 'answered', inFlight: limiter.limit });
      t += 5;
    }
    expect(limiter.limit).toBe(32);
  });

  it('does not shrink for a pause that delays every request in flight at once (the engine host stalled for a moment)', () => {
    const limiter = new AdaptiveConcurrency({ ceiling: 32 });
    const clock = { t: 0 };
    feed(limiter, clock, 1000, 100);
    expect(limiter.limit).toBe(32);
    // All 32 requests in flight answer together 150 ms late...
    const pausedAt = clock.t;
    for (let i = 0; i < 32; i++) limiter.record({ startedAt: pausedAt - 100 + i * 3, latencyMs: 250 - i * 3, outcome: 'answered', inFlight: 32 });
    // ...and those sent after it are answered as before.
    clock.t = pausedAt + 150;
    feed(limiter, clock, 200, 100);
    expect(limiter.limit).toBe(32);
  });

  it('does not halve slow start for such a pause either: it goes on doubling once answers are quick again', () => {
    const limiter = new AdaptiveConcurrency({ ceiling: 128 });
    let t = 0;
    const roundTrip = (latencyMs: number) => {
      const limit = limiter.limit;
      for (let i = 0; i < limit; i++) limiter.record({ startedAt: t, latencyMs, outcome: 'answered', inFlight: limit, limit });
      t += latencyMs;
    };
    while (limiter.limit < 16) roundTrip(100);
    const before = limiter.limit;
    roundTrip(250);
    expect(limiter.limit).toBeGreaterThanOrEqual(before);
    for (let i = 0; i < 5; i++) roundTrip(100);
    expect(limiter.limit).toBe(128);
  });

  it('shrinks by latencyBackoff, not by half, for a rise that persists once slow start has ended at the ceiling', () => {
    const limiter = new AdaptiveConcurrency({ ceiling: 32 });
    const clock = { t: 0 };
    feed(limiter, clock, 1000, 100);
    expect(limiter.limit).toBe(32);
    const seen = drive(limiter, clock, 200, () => 200);
    expect(Math.min(...seen)).toBeLessThan(32);
    expect(seen.find((limit) => limit < 32)).toBe(28);
  });

  it.each(['overloaded', 'timeout'] as const)('halves on %s, once per window of requests sent after the previous cut', (outcome) => {
    const limiter = new AdaptiveConcurrency({ ceiling: 32 });
    const clock = { t: 0 };
    feed(limiter, clock, 1000, 100);
    expect(limiter.limit).toBe(32);
    const cutAt = clock.t;
    limiter.record({ startedAt: cutAt - 100, latencyMs: 100, outcome, inFlight: 32 });
    expect(limiter.limit).toBe(16);
    // The other requests already in flight when it was cut fail too: no further halving for them.
    for (let i = 0; i < 31; i++) limiter.record({ startedAt: cutAt - 50, latencyMs: 60, outcome, inFlight: 32 });
    expect(limiter.limit).toBe(16);
    // One sent after the cut fails too: halved again.
    limiter.record({ startedAt: cutAt + 10, latencyMs: 100, outcome, inFlight: 16 });
    expect(limiter.limit).toBe(8);
    for (let i = 0; i < 20; i++) limiter.record({ startedAt: cutAt + 1000 * (i + 1), latencyMs: 10, outcome, inFlight: 8 });
    expect(limiter.limit).toBe(1);
  });

  it('ignores other failures (a 500 or a refused connection says nothing about load)', () => {
    const limiter = new AdaptiveConcurrency({ ceiling: 8, initial: 8 });
    for (let i = 0; i < 100; i++) limiter.record({ startedAt: i, latencyMs: 1, outcome: 'failed', inFlight: 8 });
    expect(limiter.limit).toBe(8);
  });

  it('uses engine load metrics: requests waiting inside the engine shrink it, a full KV cache stops growth', () => {
    const clock = { t: 0 };
    const waiting = new AdaptiveConcurrency({ ceiling: 32 });
    feed(waiting, clock, 1000, 100);
    expect(waiting.limit).toBe(32);
    waiting.observeLoad({ waiting: 6, running: 32 }, clock.t);
    feed(waiting, clock, 200, 100);
    expect(waiting.limit).toBeLessThan(32);
    // Stale metrics (nobody scraped for a while) are not used.
    clock.t += 60_000;
    feed(waiting, clock, 3000, 100);
    expect(waiting.limit).toBe(32);

    const full = new AdaptiveConcurrency({ ceiling: 32, initial: 4 });
    const fullClock = { t: 0 };
    full.observeLoad({ kvUsage: 0.99, running: 4, waiting: 0 }, 0);
    feed(full, fullClock, 50, 100);
    expect(full.limit).toBe(4);
  });

  it('rejects a ceiling below 1 by name', () => {
    expect(() => new AdaptiveConcurrency({ ceiling: 0 })).toThrow(/ceiling/);
  });
});
