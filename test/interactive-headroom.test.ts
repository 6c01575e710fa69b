import { describe, expect, it } from 'vitest';
import { DecayingMean, DecayingRate } from '../src/engine/scheduling/decaying-estimators.js';
import { type FleetShare, InteractiveHeadroom, partOfReserve, shareFraction } from '../src/engine/scheduling/interactive-headroom.js';

describe('decaying estimators', () => {
  it('a decaying rate converges to the arrival rate and falls off once arrivals stop', () => {
    const rate = new DecayingRate(10_000);
    expect(rate.perSecond(0)).toBe(0);
    // 4 arrivals a second for two minutes: twelve time constants, so the start-up bias is gone.
    for (let t = 0; t <= 120_000; t += 250) rate.record(t);
    expect(rate.perSecond(120_000)).toBeGreaterThan(3.9);
    expect(rate.perSecond(120_000)).toBeLessThan(4.1);
    // One time constant later without arrivals: e⁻¹ of it (the time observed grows too, by a hair).
    expect(rate.perSecond(130_000)).toBeCloseTo(rate.perSecond(120_000) / Math.E, 4);
    // Asked about an earlier time than the last arrival: no growth, no negative decay.
    expect(rate.perSecond(100_000)).toBeCloseTo(rate.perSecond(120_000), 6);
  });

  it('a decaying rate is the arrival rate from the first seconds of traffic on, and starts over after a long silence', () => {
    const rate = new DecayingRate(30_000);
    // 20 arrivals a second for five seconds: a sixth of a time constant.
    for (let t = 0; t <= 5_000; t += 50) rate.record(t);
    expect(rate.perSecond(5_000)).toBeGreaterThan(19.5);
    expect(rate.perSecond(5_000)).toBeLessThan(20.5);
    // Ten minutes of silence, then 2 a second: not what remains of the 20.
    for (let t = 605_000; t <= 610_000; t += 500) rate.record(t);
    expect(rate.perSecond(610_000)).toBeGreaterThan(1.9);
    expect(rate.perSecond(610_000)).toBeLessThan(2.1);
  });

  it('a decaying mean weighs recent samples more and keeps the last value when samples stop', () => {
    const mean = new DecayingMean(10_000);
    expect(mean.value(0)).toBeUndefined();
    for (let t = 0; t < 60_000; t += 100) mean.record(t, 200);
    for (let t = 60_000; t < 120_000; t += 100) mean.record(t, 800);
    // After six time constants of 800, the 200s weigh e⁻⁶ of it.
    expect(mean.value(120_000)).toBeGreaterThan(795);
    // No new sample: the mean does not drift toward zero (the rate says how busy, the mean how long).
    expect(mean.value(10_000_000)).toBeCloseTo(mean.value(120_000)!, 6);
  });
});

describe('interactive headroom (Little’s law)', () => {
  const settings = { timeConstantMs: 10_000, spread: 2, idleAfterMs: 60_000, leftoverShare: 0.9 };

  it('is zero before any interactive traffic', () => {
    expect(new InteractiveHeadroom(settings).slots(1_000_000)).toBe(0);
  });

  it('follows arrival rate × latency plus a safety margin that grows as its square root', () => {
    const headroom = new InteractiveHeadroom(settings);
    // 5 requests a second, 400 ms each: two in service on average.
    for (let t = 0; t <= 120_000; t += 200) {
      headroom.arrived(t);
      headroom.served(t, 400);
    }
    // ⌈2 + 2·√2⌉ = 5: the count in service of Poisson arrivals has a spread of √(λW).
    expect(headroom.slots(120_000)).toBe(5);
    expect(headroom.load(120_000)).toBeCloseTo(2, 1);

    // Ten times the rate at the same latency: the slots follow (⌈20 + 2·√20⌉ = 29).
    for (let t = 120_020; t <= 300_000; t += 20) {
      headroom.arrived(t);
      headroom.served(t, 400);
    }
    expect(headroom.slots(300_000)).toBe(29);
  });

  it('keeps at least one slot while there was recent traffic, and decays to none once it stops', () => {
    const headroom = new InteractiveHeadroom(settings);
    headroom.arrived(1_000);
    headroom.served(1_050, 50);
    expect(headroom.slots(1_100)).toBe(1);

    const busy = new InteractiveHeadroom(settings);
    for (let t = 0; t <= 120_000; t += 100) {
      busy.arrived(t);
      busy.served(t, 1_000);
    }
    const slots = [0, 10_000, 30_000, 59_000, 61_000].map((after) => busy.slots(120_000 + after));
    // Non-increasing as the rate estimate decays, at least one while recent, none after idleAfterMs.
    expect(slots[0]).toBeGreaterThanOrEqual(14);
    for (let i = 1; i < slots.length; i++) expect(slots[i]).toBeLessThanOrEqual(slots[i - 1]!);
    expect(slots[3]).toBeGreaterThanOrEqual(1);
    expect(slots[4]).toBe(0);
  });

  it('never reserves so much that batches get less than 90% of what interactive traffic leaves idle', () => {
    const headroom = new InteractiveHeadroom(settings);
    for (let t = 0; t <= 120_000; t += 200) {
      headroom.arrived(t);
      headroom.served(t, 400);
    }
    // Load 2: the margin asks for 5 slots.
    expect(headroom.reserve(120_000, 64)).toBe(5);
    // Of 8 slots interactive leaves 6 idle; batches keep ⌈0.9 × 6⌉ = 6, so 2 are reserved.
    expect(headroom.reserve(120_000, 8)).toBe(2);
    // One slot and a trickle of interactive traffic: the batch keeps it.
    const trickle = new InteractiveHeadroom(settings);
    trickle.arrived(0);
    trickle.served(10, 10);
    expect(trickle.slots(20)).toBe(1);
    expect(trickle.reserve(20, 1)).toBe(0);
    expect(trickle.reserve(20, 0)).toBe(0);
  });

  it('an arrival with no latency sample yet still reserves one slot', () => {
    const headroom = new InteractiveHeadroom(settings);
    headroom.arrived(5_000);
    expect(headroom.slots(5_000)).toBe(1);
  });

  it('counts the interactive load other processes report while the report is fresh, each source once', () => {
    const headroom = new InteractiveHeadroom({ ...settings, remoteFreshMs: 5_000 });
    // Two API processes, one request in service each.
    headroom.observeRemote('api-a', 1, 1_000);
    headroom.observeRemote('api-b', 1, 1_000);
    // A newer report from the same source replaces the older one.
    headroom.observeRemote('api-a', 1, 2_000);
    expect(headroom.load(2_000)).toBeCloseTo(2, 5);
    // ⌈2 + 2·√2⌉ = 5, as if the requests were seen here.
    expect(headroom.slots(2_000)).toBe(5);
    expect(headroom.reserve(2_000, 64)).toBe(5);
    // This process saw none of them itself: nothing to report on.
    expect(headroom.estimate(2_000)).toBeUndefined();
    // Reports stop: after remoteFreshMs they say nothing, and no slot is kept.
    expect(headroom.load(7_500)).toBeCloseTo(0, 5);
    expect(headroom.slots(7_500)).toBe(0);
  });

  it('keeps its share of the fleet’s reserve, not a reserve of its own for its share of the load', () => {
    const headroom = new InteractiveHeadroom({ timeConstantMs: 10_000, spread: 2, idleAfterMs: 60_000, leftoverShare: 0.95 });
    // An API serves 2 requests in service; two inference processors of 20 slots each hold half the work.
    headroom.observeRemote('api', 2, 1_000, 0.5);
    // The fleet: ⌈2 + 2·√2⌉ = 5 wanted, capped to 40 − ⌈0.95 · 38⌉ = 3 (batches keep 95% of the rest); half of it, rounded.
    expect(headroom.reserve(1_000, 20)).toBe(2);
    // Alone with the same share of the load (1 in service on 20 slots), the cap leaves 20 − ⌈0.95 · 19⌉ = 1.
    const alone = new InteractiveHeadroom({ timeConstantMs: 10_000, spread: 2, idleAfterMs: 60_000, leftoverShare: 0.95 });
    alone.observeRemote('api', 1, 1_000);
    expect(alone.reserve(1_000, 20)).toBe(1);
    // Of the API's 2 requests in service, the half this processor's share stands for use slots of
    // its part of the reserve unseen (the engine should show the rest free); none once the report is stale.
    expect(headroom.remoteInService(1_000)).toBe(1);
    expect(alone.remoteInService(1_000)).toBe(1);
    expect(headroom.remoteInService(10_000)).toBe(0);
  });

  it('split by the partitions each processor holds, the parts add up to the fleet’s reserve exactly', () => {
    const settingsHere = { timeConstantMs: 10_000, spread: 2, idleAfterMs: 60_000, leftoverShare: 0.95 };
    const keptBy = (shares: FleetShare[]) =>
      shares.map((share) => {
        const headroom = new InteractiveHeadroom(settingsHere);
        headroom.observeRemote('api', 2, 1_000, share);
        return headroom.reserve(1_000, 20 * shareFraction(share) * 2);
      });
    // The fleet of 40 slots keeps 3 (as above). Halves as numbers round 1.5 up on both: 4 kept.
    expect(keptBy([0.5, 0.5])).toEqual([2, 2]);
    // Two processors with 16 partitions each, however they are dealt: 3 in all.
    const even = Array.from({ length: 16 }, (_, index) => 2 * index);
    const odd = even.map((index) => index + 1);
    const low = Array.from({ length: 16 }, (_, index) => index);
    const high = low.map((index) => index + 16);
    for (const [a, b] of [[even, odd], [low, high]] as const) {
      const parts = keptBy([{ held: a, of: 32 }, { held: b, of: 32 }]);
      expect(parts[0]! + parts[1]!).toBe(3);
    }
    // Three processors holding 11, 11 and 10 of 32 partitions: still the fleet's 3.
    const thirds = [low.slice(0, 11), [...low.slice(11), ...high.slice(0, 6)], high.slice(6)];
    expect(keptBy(thirds.map((held) => ({ held, of: 32 }))).reduce((sum, part) => sum + part, 0)).toBe(3);
    for (let reserve = 0; reserve <= 40; reserve++) {
      expect(partOfReserve(reserve, { held: even, of: 32 }) + partOfReserve(reserve, { held: odd, of: 32 })).toBe(reserve);
    }
  });

  it('estimates its own traffic for other processes: arrivals per second and mean time in service', () => {
    const headroom = new InteractiveHeadroom(settings);
    for (let t = 0; t <= 60_000; t += 100) {
      headroom.arrived(t);
      headroom.served(t, 150);
    }
    const estimate = headroom.estimate(60_000)!;
    expect(estimate.arrivalsPerSecond).toBeCloseTo(10, 0);
    expect(estimate.latencyMs).toBeCloseTo(150, 5);
    expect(headroom.estimate(60_000 + settings.idleAfterMs + 1)).toBeUndefined();
  });
});
