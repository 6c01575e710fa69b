import { describe, expect, it } from 'vitest';
import { nearestRank } from '../src/platform/percentile.js';
import { EngineCapacity } from '../src/engine/scheduling/engine-capacity.js';
import { InteractiveObjective } from '../src/engine/scheduling/interactive-objective.js';
import { DiscreteEvents, seededRandom } from './support/discrete-events.js';
import { continuousBatchingEngine } from './support/engine-models.js';

// Batch work beside live traffic on a continuous-batching engine in simulated time (a stand-in for
// a GPU inference server, which cannot run here): every sequence in the batch slows every other, so
// the interactive p99 depends on how much batch work runs, and the objective sets how much may.

const engineShape = { maxSeqs: 64, baseMs: 12, perSeqMs: 0.15, prefillMsPerRequest: 0.4, outputTokens: 48 };
const ARRIVALS_PER_SECOND = 5;

interface Outcome {
  /** Batch answers per second over the second half. */
  batchRate: number;
  /** p99 of the interactive answers over the second half. */
  interactiveP99: number;
}

/**
 * Interactive requests arriving at random (Poisson, seeded) beside batch work held to `batchLimit()`
 * in flight; the engine serves in arrival order (no priority hints).
 */
function beside(batchLimit: (sim: DiscreteEvents, batchInFlight: number) => number, untilMs: number, onInteractive?: (at: number, latencyMs: number) => void, onBatch?: (startedAt: number, latencyMs: number, inFlight: number) => void): Outcome {
  const sim = new DiscreteEvents();
  const engine = continuousBatchingEngine(sim, engineShape);
  const random = seededRandom(7);
  const from = untilMs / 2;
  let batchInFlight = 0;
  let batchAnswers = 0;
  const interactive: number[] = [];
  const pump = () => {
    const limit = batchLimit(sim, batchInFlight);
    const burst = Math.max(0, limit - batchInFlight);
    batchInFlight += burst;
    const sentWith = batchInFlight;
    for (let i = 0; i < burst; i++) {
      const startedAt = sim.now;
      engine.submit(() => {
        batchInFlight -= 1;
        if (sim.now >= from) batchAnswers += 1;
        onBatch?.(startedAt, sim.now - startedAt, sentWith);
        sim.after(0, pump);
      });
    }
  };
  const arrive = () => {
    const startedAt = sim.now;
    engine.submit(() => {
      onInteractive?.(sim.now, sim.now - startedAt);
      if (startedAt >= from) interactive.push(sim.now - startedAt);
      pump();
    });
    sim.after((-Math.log(1 - random()) * 1000) / ARRIVALS_PER_SECOND, arrive);
  };
  sim.after(0, pump);
  sim.after(0, arrive);
  const tick = () => {
    pump();
    sim.after(100, tick);
  };
  sim.after(100, tick);
  sim.runUntil(untilMs);
  return { batchRate: (batchAnswers * 1000) / (untilMs - from), interactiveP99: nearestRank(interactive, 0.99) };
}

describe('the interactive objective on a continuous-batching engine', () => {
  const alone = beside(() => 0, 120_000).interactiveP99;
  const objectiveMs = Math.round(1.4 * alone);

  it('keeps the interactive p99 within the objective and gives batches at least 90% of what the engine can give at it', () => {
    // What the engine can give at the objective, from the model itself: the most batch throughput
    // among fixed batch concurrencies whose interactive p99 stays within it.
    let best = 0;
    for (let concurrency = 1; concurrency <= engineShape.maxSeqs; concurrency++) {
      const fixed = beside(() => concurrency, 120_000);
      if (fixed.interactiveP99 <= objectiveMs) best = Math.max(best, fixed.batchRate);
    }
    expect(best).toBeGreaterThan(0);

    const capacity = new EngineCapacity({ ceiling: 4 * engineShape.maxSeqs });
    const objective = new InteractiveObjective({ p99Ms: objectiveMs });
    capacity.interactiveTraffic(true);
    const result = beside(
      (sim, inFlight) => Math.min(capacity.limit, objective.batchCap(sim.now, inFlight)),
      300_000,
      (at, latencyMs) => objective.answered(at, latencyMs),
      (startedAt, latencyMs, inFlight) => capacity.record({ startedAt, latencyMs, outcome: 'answered', inFlight }),
    );
    expect(result.interactiveP99).toBeLessThanOrEqual(objectiveMs);
    expect(result.batchRate / best).toBeGreaterThanOrEqual(0.9);
    // Without the objective the batch fills the engine and the interactive p99 is far past it.
    const unprotected = beside(() => engineShape.maxSeqs * 4, 120_000);
    expect(unprotected.interactiveP99).toBeGreaterThan(objectiveMs);
  });
});

describe('the interactive objective, rule by rule', () => {
  it('cuts what was in flight when the p99 misses, grows below the margin, holds between, judging only answers since the last change', () => {
    const objective = new InteractiveObjective({ p99Ms: 100, leastAnswers: 10, roomAnswers: 20 });
    let t = 0;
    const answers = (count: number, latencyMs: number) => {
      for (let i = 0; i < count; i++) objective.answered((t += 200), latencyMs);
    };
    answers(10, 50);
    expect(objective.batchCap(t, 40)).toBe(Number.POSITIVE_INFINITY);
    // Half the answers just past the objective (their p90 too, by 5%): a tenth off.
    answers(10, 105);
    expect(objective.batchCap(t, 40)).toBe(36);
    // Too few answers since the cut: no judgement.
    answers(5, 105);
    expect(objective.batchCap(t, 36)).toBe(36);
    answers(5, 105);
    expect(objective.batchCap(t, 36)).toBe(32);
    answers(10, 95);
    expect(objective.batchCap(t, 32)).toBe(32);
    // Held: the answers at this cap go on counting, the oldest let go once there are four times
    // enough to judge room (the last 20 of 80 are then all below the margin).
    answers(70, 50);
    expect(objective.batchCap(t, 32)).toBe(32);
    expect(objective.batchCap(t, 32)).toBe(34);
    expect(objective.measuredP99(t)).toBe(105);
  });

  it('cuts by how far past the objective the answers are, and grows only on as many answers as a p99 needs, never on the slowest of a few dozen', () => {
    const objective = new InteractiveObjective({ p99Ms: 100 });
    let t = 0;
    // Every answer twice the objective: cut by that ratio (to half), not by a tenth.
    for (let i = 0; i < 30; i++) objective.answered((t += 200), 200);
    expect(objective.batchCap(t, 50)).toBe(25);
    // 99 answers all well within the objective: not yet enough to say its p99 has room.
    for (let i = 0; i < 99; i++) objective.answered((t += 200), 10);
    expect(objective.batchCap(t, 25)).toBe(25);
    objective.answered((t += 200), 10);
    expect(objective.batchCap(t, 25)).toBe(27);
    // One in a hundred near the objective (2% of them, say, above the margin): held, not grown.
    for (let i = 0; i < 99; i++) objective.answered((t += 200), 10);
    objective.answered((t += 200), 97);
    expect(objective.batchCap(t, 27)).toBe(27);
    // A third of the answers since the last change past it by a quarter (their p90 too): cut by
    // 100/125, more than a tenth.
    for (let i = 0; i < 60; i++) objective.answered((t += 200), 125);
    expect(objective.batchCap(t, 27)).toBe(21);
  });

  it('judges what other processes report only once they have reported 30 answers (a report\'s p99 is nearly its slowest)', () => {
    const objective = new InteractiveObjective({ p99Ms: 100 });
    objective.reportedBy(1_000, 150, 10);
    expect(objective.batchCap(1_000, 40)).toBe(Number.POSITIVE_INFINITY);
    objective.reportedBy(2_000, 150, 25);
    // 35 answers, their p99 past the aim (98 ms) by half: cut by the ratio, 98 / 150.
    expect(objective.batchCap(2_000, 40)).toBe(26);
  });

  it('lifts the cap once interactive traffic stops', () => {
    const objective = new InteractiveObjective({ p99Ms: 100, leastAnswers: 5, idleMs: 1_000 });
    for (let i = 0; i < 5; i++) objective.answered(i, 500);
    expect(objective.batchCap(10, 20)).toBe(10);
    expect(objective.batchCap(2_000, 18)).toBe(Number.POSITIVE_INFINITY);
  });

  it('refuses an objective that is not a positive number of ms', () => {
    expect(() => new InteractiveObjective({ p99Ms: 0 })).toThrow(/objective/);
    expect(() => new InteractiveObjective({ p99Ms: Number.NaN })).toThrow(/objective/);
  });
});
