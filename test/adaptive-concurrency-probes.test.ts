import { describe, expect, it } from 'vitest';
import { AdaptiveConcurrency } from '../src/engine/scheduling/adaptive-concurrency.js';
import { drive, simulateEngine } from './support/concurrency-drivers.js';

// How often the limit probes above an engine's capacity, and how interactive traffic (here or in
// another process) holds it back.
describe('adaptive concurrency', () => {
  it('while interactive requests are served, slow start grows by one per round trip: it overshoots the engine by a few requests, not by half', () => {
    const highest = (interactive: boolean) => Math.max(...Array.from({ length: 10 }, (_, seed) => simulateEngine(seed + 1, { interactive, slots: 32, ceiling: 128, untilMs: 30_000 }).highest));
    expect(highest(false)).toBeGreaterThan(44);
    expect(highest(true)).toBeLessThanOrEqual(40);
    for (let seed = 1; seed <= 10; seed++) {
      const { limit } = simulateEngine(seed, { interactive: true, slots: 32, ceiling: 128, untilMs: 30_000 });
      expect(limit).toBeGreaterThanOrEqual(29);
      expect(limit).toBeLessThanOrEqual(32);
    }
  });

  it('probes above an engine’s capacity less and less often while it stays put, and at once again after it changes', () => {
    const engine = { slots: 32 };
    const latencyAt = (inFlight: number) => 100 * Math.max(1, inFlight / engine.slots);
    const limiter = new AdaptiveConcurrency({ ceiling: 128 });
    const clock = { t: 0 };
    const probesIn = (seen: number[]) => seen.filter((limit, index) => index > 0 && limit > engine.slots && seen[index - 1]! <= engine.slots).length;
    const early = probesIn(drive(limiter, clock, 4_000, latencyAt));
    drive(limiter, clock, 20_000, latencyAt);
    const late = probesIn(drive(limiter, clock, 4_000, latencyAt));
    expect(late).toBeLessThan(early);
    expect(late).toBeLessThanOrEqual(1);
    // The engine gets twice the slots: found within a few thousand answers, not after the longest hold.
    engine.slots = 64;
    const seen = drive(limiter, clock, 6_000, latencyAt);
    expect(Math.max(...seen.slice(-1000))).toBeGreaterThanOrEqual(60);
  });

  it('probes more rarely still while interactive requests are being served (a probe delays them)', () => {
    const latencyAt = (inFlight: number) => 100 * Math.max(1, inFlight / 32);
    const probes = (interactive: boolean) => {
      const limiter = new AdaptiveConcurrency({ ceiling: 128 });
      const clock = { t: 0 };
      limiter.interactiveTraffic(interactive);
      const seen = drive(limiter, clock, 8_000, latencyAt);
      return seen.filter((limit, index) => index > 0 && limit > 32 && seen[index - 1]! <= 32).length;
    };
    // Slow start, then no probe for minutes.
    expect(probes(true)).toBeLessThanOrEqual(1);
    expect(probes(true)).toBeLessThan(probes(false));
  });

  it('with interactive traffic, probes above what the last probe found once in `interactiveProbeGapMs`, and regrows below it freely', () => {
    const engine = { slots: 32 };
    const latencyAt = (inFlight: number) => 100 * Math.max(1, inFlight / engine.slots);
    const limiter = new AdaptiveConcurrency({ ceiling: 128, interactiveProbeGapMs: 60_000 });
    limiter.interactiveTraffic(true);
    const clock = { t: 0 };
    const probeStarts: number[] = [];
    let previous = limiter.limit;
    // Ten simulated minutes: slow start, then a probe a minute at most.
    while (clock.t < 600_000) {
      drive(limiter, clock, 1, latencyAt);
      if (limiter.limit > engine.slots && previous <= engine.slots) probeStarts.push(clock.t);
      previous = limiter.limit;
    }
    expect(probeStarts.length).toBeGreaterThanOrEqual(2);
    expect(probeStarts.length).toBeLessThanOrEqual(11);
    for (let i = 2; i < probeStarts.length; i++) expect(probeStarts[i]! - probeStarts[i - 1]!).toBeGreaterThanOrEqual(60_000);
    // The engine doubles: the next probe finds it, within the gap and a little.
    engine.slots = 64;
    const seen = drive(limiter, clock, 60_000, latencyAt);
    expect(Math.max(...seen.slice(-1000))).toBeGreaterThanOrEqual(60);
  });

  it('gives a slot back when told another process’s interactive requests queue in the engine, stays there while they are served until the probe gap, and never below half what the probe found', () => {
    const latencyAt = (inFlight: number) => 100 * Math.max(1, inFlight / 32);
    const limiter = new AdaptiveConcurrency({ ceiling: 128, interactiveProbeGapMs: 60_000 });
    limiter.interactiveTraffic(true);
    const clock = { t: 0 };
    // Slow start and its cut: the engine's 32 slots found.
    drive(limiter, clock, 3_000, latencyAt);
    const found = limiter.limit;
    expect(found).toBeGreaterThanOrEqual(31);
    expect(found).toBeLessThanOrEqual(33);
    // Another process (the API) says its interactive requests wait inside the engine.
    expect(limiter.yieldSlot(clock.t)).toBe(true);
    expect(limiter.limit).toBe(found - 1);
    // The latency at that level is the floor: without the yield's hold it would grow straight back.
    const seen = drive(limiter, clock, 3_000, () => 100);
    expect(Math.max(...seen)).toBe(found - 1);
    // Once the probe gap has passed, it may grow again.
    clock.t += 60_000;
    expect(Math.max(...drive(limiter, clock, 3_000, () => 100))).toBeGreaterThan(found - 1);
    // Told again and again, it stops at half of what the last probe found.
    const lowest = new AdaptiveConcurrency({ ceiling: 128 });
    lowest.interactiveTraffic(true);
    const time = { t: 0 };
    drive(lowest, time, 3_000, latencyAt);
    const probed = lowest.limit;
    let yielded = 0;
    while (lowest.yieldSlot(time.t)) yielded += 1;
    expect(lowest.limit).toBe(Math.ceil(probed / 2));
    expect(yielded).toBe(probed - Math.ceil(probed / 2));
    // With no probe to go by (the limit at its ceiling, never cut), half of where the first yield found it.
    const capped = new AdaptiveConcurrency({ ceiling: 8 });
    const at = { t: 0 };
    drive(capped, at, 500, () => 100);
    expect(capped.limit).toBe(8);
    while (capped.yieldSlot(at.t));
    expect(capped.limit).toBe(4);
  });
});
