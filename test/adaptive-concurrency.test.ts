import { describe, expect, it } from 'vitest';
import { AdaptiveConcurrency } from '../src/engine/scheduling/adaptive-concurrency.js';
import { drive, feed, simulateEngine } from './support/concurrency-drivers.js';
import { seededRandom } from './support/discrete-events.js';

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

  it('finds a first floor in one round trip and reaches the engine’s slots a few round trips later; an engine of few slots is still learned from the start', () => {
    // 4 in flight for one round trip, then doubling: 32 by about half a second (it took over 0.6 s
    // with a first window of 16 answers, four round trips at 4 in flight).
    for (let seed = 1; seed <= 5; seed++) expect(simulateEngine(seed, { interactive: false, slots: 32, ceiling: 32, untilMs: 520 }).limit).toBe(32);
    for (let seed = 1; seed <= 5; seed++) expect(simulateEngine(seed, { interactive: false, slots: 4, ceiling: 128, untilMs: 20_000 }).limit).toBe(4);
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
    // Latency tolerated up to 1.1 × its floor, plus the round trips it takes to see a rise.
    expect(Math.max(...seen.slice(-1000))).toBeLessThanOrEqual(11);
    // Another tenant takes half the engine: the limit follows.
    engine.slots = 4;
    drive(limiter, clock, 3000, latencyAt);
    expect(limiter.limit).toBeGreaterThanOrEqual(4);
    expect(limiter.limit).toBeLessThanOrEqual(7);
  });

  it('does not take a sub-millisecond rise for a queue: an engine answering at once is not held to one request', () => {
    // A stand-in answering from its event loop: 0.15 ms alone, 20 µs more per request beside it.
    // At the ceiling a request waits about 1.3 ms more than alone: nothing an interactive request
    // would notice, while a limit of 1 or 2 would bound the batch by round trips between threads.
    const limiter = new AdaptiveConcurrency({ ceiling: 64 });
    drive(limiter, { t: 0 }, 20_000, (inFlight) => 0.15 + 0.02 * inFlight);
    expect(limiter.limit).toBe(64);
    // The same rise on a slow engine's scale is a queue (10% tolerance): the slack is in ms, not a ratio.
    const slow = new AdaptiveConcurrency({ ceiling: 64 });
    drive(slow, { t: 0 }, 20_000, (inFlight) => 100 * Math.max(1, inFlight / 8));
    expect(slow.limit).toBeLessThanOrEqual(11);
  });

  it('still finds the slots of a fast engine, whose queue adds milliseconds', () => {
    // 5 ms a request, 8 slots: at 64 in flight a request waits 35 ms inside the engine.
    const limiter = new AdaptiveConcurrency({ ceiling: 64 });
    const seen = drive(limiter, { t: 0 }, 20_000, (inFlight) => 5 * Math.max(1, inFlight / 8));
    expect(limiter.limit).toBeGreaterThanOrEqual(8);
    expect(Math.max(...seen.slice(-5_000))).toBeLessThanOrEqual(12);
  });

  it('from far past an engine’s slots, comes back to what the engine serves in one cut, and stays near it', () => {
    // ENGINE_CONCURRENCY four times the engine's 32 slots: slow start overshoots before latency shows it.
    const latencyAt = (inFlight: number) => 100 * Math.max(1, inFlight / 32);
    const limiter = new AdaptiveConcurrency({ ceiling: 128 });
    const clock = { t: 0 };
    const seen = drive(limiter, clock, 20_000, latencyAt);
    const firstCut = seen.findIndex((limit, index) => index > 0 && limit < seen[index - 1]!);
    expect(seen[firstCut - 1]).toBeGreaterThan(32);
    // Little's law over the window that saw the rise: in slow start part of it was sent below the
    // slots, so it lands under them, and never below half at once.
    expect(seen[firstCut]).toBeGreaterThanOrEqual(Math.floor(seen[firstCut - 1]! / 2));
    expect(seen[firstCut]).toBeLessThanOrEqual(33);
    const late = seen.slice(-5000);
    expect(Math.min(...late)).toBeGreaterThanOrEqual(30);
    // Requests queued inside the engine: at most a tenth of its slots, and on average a few.
    expect(Math.max(...late)).toBeLessThanOrEqual(36);
    expect(late.reduce((sum, limit) => sum + limit, 0) / late.length).toBeLessThanOrEqual(34.5);
  });

  it('after slow start far past an engine’s slots, settles at them, not a request or two above (which would queue inside the engine for good)', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const { limit, meanQueued } = simulateEngine(seed, { interactive: false, slots: 32, ceiling: 128, untilMs: 60_000 });
      expect(limit).toBeGreaterThanOrEqual(30);
      expect(limit).toBeLessThanOrEqual(32);
      expect(meanQueued).toBeLessThan(0.5);
    }
  });

  it('after a probe, does not trim the limit for a rise below `queueSlackMs` (the hosts, not a queue inside the engine) unless interactive requests are served', () => {
    // 32 slots; with the engine just full the answers come 1.8 ms later (the hosts' event loops busier), not 3 ms (one queued).
    const latencyAt = (inFlight: number) => (inFlight < 32 ? 100 : inFlight === 32 ? 101.8 : 100 * (inFlight / 32));
    const limiter = new AdaptiveConcurrency({ ceiling: 128 });
    const seen = drive(limiter, { t: 0 }, 20_000, latencyAt);
    expect(Math.min(...seen.slice(-5000))).toBeGreaterThanOrEqual(32);
    // While interactive requests are served it errs low: a request too many would queue inside
    // the engine, and an interactive request arriving might wait behind it.
    const beside = new AdaptiveConcurrency({ ceiling: 128 });
    beside.interactiveTraffic(true);
    drive(beside, { t: 0 }, 20_000, latencyAt);
    expect(beside.limit).toBeLessThanOrEqual(31);
  });

  it('a rise at what the engine already served is not its own queue: a stall passes, a lasting rise goes to what the engine serves now', () => {
    const limiter = new AdaptiveConcurrency({ ceiling: 32 });
    const clock = { t: 0 };
    drive(limiter, clock, 2_000, () => 100);
    expect(limiter.limit).toBe(32);
    // Two round trips slower by a third: a stall of either host.
    drive(limiter, clock, 64, () => 133);
    drive(limiter, clock, 500, () => 100);
    expect(limiter.limit).toBe(32);
    // Another client takes a quarter of the engine: it serves 24 of ours at a time from now on.
    const seen = drive(limiter, clock, 3_000, (inFlight) => 100 * Math.max(1, inFlight / 24));
    expect(Math.min(...seen)).toBeGreaterThanOrEqual(23);
    // Probes still go up to a tenth above, now and then.
    const late = seen.slice(-1000);
    expect(Math.max(...late)).toBeLessThanOrEqual(27);
    expect(late.reduce((sum, limit) => sum + limit, 0) / late.length).toBeLessThan(25);
  });

  it('counts slots kept free for interactive requests as in use', () => {
    const grown = (reserved: number) => {
      const limiter = new AdaptiveConcurrency({ ceiling: 64, initial: 8 });
      for (let i = 0; i < 200; i++) limiter.record({ startedAt: i * 10, latencyMs: 100, outcome: 'answered', inFlight: limiter.limit - 3, reserved });
      return limiter.limit;
    };
    expect(grown(0)).toBe(8);
    expect(grown(3)).toBeGreaterThan(8);
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

  it.each([
    ['exponential', (random: () => number) => -100 * Math.log(1 - random())],
    ['one long request in four, at random', (random: () => number) => (random() < 0.25 ? 300 : 60)],
  ] as const)('does not shrink for random latency that does not grow with the load (%s)', (_name, latencyOf) => {
    const random = seededRandom(11);
    const limiter = new AdaptiveConcurrency({ ceiling: 64 });
    const seen: number[] = [];
    let t = 0;
    for (let i = 0; i < 50_000; i++) {
      limiter.record({ startedAt: t, latencyMs: latencyOf(random), outcome: 'answered', inFlight: limiter.limit });
      t += 100 / limiter.limit;
      seen.push(limiter.limit);
    }
    expect(limiter.limit).toBe(64);
    expect(Math.min(...seen.slice(-40_000))).toBe(64);
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
