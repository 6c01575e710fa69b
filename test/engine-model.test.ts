import { describe, expect, it } from 'vitest';
import type { StepRecord as Step } from './support/engine-model/continuous-batching-engine.js';
import { type Arrival, type Outcome, closedLoop, simulateEmbeddings, simulateGeneration } from './support/engine-model/engine-simulation.js';

// The engine models behind the benchmark upstream's engine mode (test/support/engine-model/continuous-batching-engine.ts,
// test/support/engine-model/embedding-batch-engine.ts): stand-ins for a GPU inference server (vLLM, SGLang) that cannot
// run here, stepping their batches as vLLM's scheduler does. They run on simulated time
// (test/support/engine-model/engine-simulation.ts), so every figure below is the model's own, never the machine's.
// The models live in test/support so that the tests and the benchmark upstream (bench/) share them:
// the tests import nothing of bench/ (test/architecture.test.ts).

/** Ample for the order tests' few requests; a scheduler that took turns for ever would stop here and fail them. */
const HORIZON_MS = 60_000;
const burst = (count: number, promptTokens: number, maxTokens: number, priority?: number): Arrival[] =>
  Array.from({ length: count }, () => ({ at: 0, promptTokens, maxTokens, ...(priority === undefined ? {} : { priority }) }));
const decodeSteps = (steps: readonly Step[]) => steps.filter((step) => step.prefillTokens === 0);
const startOrder = (outcomes: readonly Outcome[]) => [...outcomes].sort((a, b) => a.startedAt! - b.startedAt! || a.id - b.id).map((outcome) => outcome.id);

describe('the continuous-batching engine model', () => {
  it('runs its sequences together, each step longer by what each running sequence costs', () => {
    const one = decodeSteps(simulateGeneration({}, burst(1, 16, 20)).steps);
    const many = decodeSteps(simulateGeneration({}, burst(32, 16, 20)).steps);
    expect(one[0]).toMatchObject({ sequences: 1, decodeTokens: 1 });
    expect(many[0]).toMatchObject({ sequences: 32, decodeTokens: 32 });
    // Defaults: 13,200 µs a step, 80 a sequence, 20 a decoded token.
    expect(one[0]!.durationMs).toBeCloseTo(13.3, 6);
    expect(many[0]!.durationMs).toBeCloseTo(13.2 + 32 * 0.1, 6);
    // 32 sequences decode in one step what one sequence decodes in 32.
    expect(many.length).toBe(one.length);
  });

  it('prices prompt and decoded tokens apart, and chunks a long prompt to max_num_batched_tokens', () => {
    const { steps, outcomes } = simulateGeneration({ maxNumBatchedTokens: 2048 }, burst(1, 5_000, 3));
    expect(steps.map((step) => [step.prefillTokens, step.decodeTokens])).toEqual([[2048, 0], [2048, 0], [904, 0], [0, 1], [0, 1]]);
    expect(steps[0]!.durationMs).toBeCloseTo((13_200 + 80 + 60 * 2048) / 1000, 6);
    expect(steps[3]!.durationMs).toBeCloseTo((13_200 + 80 + 20) / 1000, 6);
    // The first token comes with the step that computes the prompt's last chunk.
    expect(outcomes[0]!.tokenAt[0]).toBeCloseTo(steps[2]!.startedAt + steps[2]!.durationMs, 6);
  });

  it('gives more throughput at a larger batch, and a longer time per token', () => {
    const load = { promptTokens: 1024, maxTokens: 128 };
    const alone = closedLoop({}, { ...load, concurrency: 1, requests: 10 });
    const batched = closedLoop({}, { ...load, concurrency: 32, requests: 320 });
    expect(batched.meanBatch).toBeGreaterThan(30);
    expect(batched.outputTokensPerSecond).toBeGreaterThan(5 * alone.outputTokensPerSecond);
    expect(batched.meanTpotMs).toBeGreaterThan(1.5 * alone.meanTpotMs);
    expect(batched.meanTtftMs).toBeGreaterThan(alone.meanTtftMs);
  });

  it('reproduces the published sweep it is calibrated to within 20% (Llama-3.1-8B-Instruct, one A100 40GB, 1,024 in, 128 out)', () => {
    const load = { promptTokens: 1024, maxTokens: 128 };
    const alone = closedLoop({}, { ...load, concurrency: 1, requests: 20 });
    const eight = closedLoop({}, { ...load, concurrency: 8, requests: 160 });
    // About 75 tokens/s of decode for one request; concurrency 8 gives 6.6 times the throughput.
    expect(1000 / alone.meanTpotMs).toBeGreaterThan(75 * 0.8);
    expect(1000 / alone.meanTpotMs).toBeLessThan(75 * 1.2);
    const gain = eight.outputTokensPerSecond / alone.outputTokensPerSecond;
    expect(gain).toBeGreaterThan(6.6 * 0.8);
    expect(gain).toBeLessThan(6.6 * 1.2);
  });

  it('holds at most max_num_seqs sequences in the batch; the others wait', () => {
    const { steps, outcomes } = simulateGeneration({ maxNumSeqs: 4 }, burst(10, 16, 5));
    expect(Math.max(...steps.map((step) => step.running))).toBe(4);
    expect(Math.max(...steps.map((step) => step.sequences))).toBe(4);
    expect(steps[0]).toMatchObject({ running: 4, waiting: 6 });
    // The fifth starts only once one of the first four has finished.
    const firstFinish = Math.min(...outcomes.slice(0, 4).map((outcome) => outcome.finishedAt!));
    expect(outcomes[4]!.startedAt).toBeGreaterThanOrEqual(firstFinish);
    expect(outcomes.every((outcome) => outcome.tokenAt.length === 5)).toBe(true);
  });

  it('keeps a request waiting while its prompt does not fit the KV cache, and preempts the newest sequence when the running ones outgrow it', () => {
    // 256 tokens: 16 blocks of 16. Prompts of 96 tokens (6 blocks) growing to 160 (10 blocks).
    const { steps, outcomes, counters } = simulateGeneration({ kvCacheTokens: 256 }, burst(3, 96, 64));
    const [a, b, c] = outcomes as [Outcome, Outcome, Outcome];
    expect(steps[0]).toMatchObject({ running: 2, waiting: 1, kvUsage: 12 / 16 });
    expect(c.startedAt).toBeGreaterThan(0);
    // At 129 tokens each needs 9 blocks: 18 of 16. The newer of the two gives way and recomputes.
    expect(counters.preemptions).toBeGreaterThanOrEqual(1);
    const preemptedAt = steps.findIndex((step, index) => index > 0 && step.running < steps[index - 1]!.running && !step.ids.includes(b.id) && step.ids.includes(a.id));
    expect(preemptedAt).toBeGreaterThan(0);
    expect(steps[preemptedAt]!.waiting).toBe(2);
    expect(Math.max(...steps.map((step) => step.kvUsage))).toBeLessThanOrEqual(1);
    // Nothing generated is lost or repeated: each still gets its 64 tokens, b after a.
    for (const outcome of outcomes) expect(outcome.tokenAt).toHaveLength(64);
    expect(b.finishedAt).toBeGreaterThan(a.finishedAt!);
    // The recompute is priced as prompt work: b's prompt and the tokens it had generated.
    const had = b.tokenAt.filter((at) => at <= steps[preemptedAt]!.startedAt).length;
    const resumed = steps.find((step, index) => index > preemptedAt && step.ids.includes(b.id))!;
    expect(had).toBeGreaterThan(0);
    expect(resumed.prefillTokens).toBeGreaterThanOrEqual(96 + had);
  });

  it('takes waiting requests in arrival order by default, whatever their priority field says', () => {
    const arrivals = [{ at: 0, promptTokens: 16, maxTokens: 10, priority: 5 }, ...[10, 1, 1, 0].map((priority, index) => ({ at: 1 + index, promptTokens: 16, maxTokens: 10, priority }))];
    const { outcomes, counters } = simulateGeneration({ maxNumSeqs: 1 }, arrivals, HORIZON_MS);
    expect(startOrder(outcomes)).toEqual([0, 1, 2, 3, 4]);
    expect(counters.preemptions).toBe(0);
  });

  it('under the priority policy takes the lowest priority value first, ties by arrival, and preempts a running sequence of a larger value', () => {
    const arrivals = [{ at: 0, promptTokens: 16, maxTokens: 10, priority: 5 }, ...[10, 1, 1, 0].map((priority, index) => ({ at: 1 + index, promptTokens: 16, maxTokens: 10, priority }))];
    const { outcomes, counters } = simulateGeneration({ maxNumSeqs: 1, policy: 'priority' }, arrivals, HORIZON_MS);
    // The first (priority 5) is preempted by the 0 that arrived meanwhile, and resumes after the 0 and both 1s.
    expect(startOrder(outcomes)).toEqual([0, 4, 2, 3, 1]);
    const finishOrder = [...outcomes].sort((x, y) => x.finishedAt! - y.finishedAt!).map((outcome) => outcome.id);
    expect(finishOrder).toEqual([4, 2, 3, 0, 1]);
    expect(counters.preemptions).toBeGreaterThanOrEqual(1);
    for (const outcome of outcomes) expect(outcome.tokenAt).toHaveLength(10);
  });

  it('never preempts for an equal priority', () => {
    const arrivals = [{ at: 0, promptTokens: 16, maxTokens: 10, priority: 3 }, { at: 1, promptTokens: 16, maxTokens: 10, priority: 3 }];
    const { outcomes, counters } = simulateGeneration({ maxNumSeqs: 1, policy: 'priority' }, arrivals, HORIZON_MS);
    expect(counters.preemptions).toBe(0);
    expect(outcomes[1]!.startedAt).toBeGreaterThanOrEqual(outcomes[0]!.finishedAt!);
  });

  it('scales every cost by the speed: half the speed, half the throughput', () => {
    const load = { concurrency: 16, promptTokens: 512, maxTokens: 64, requests: 64 };
    const full = closedLoop({}, load);
    const half = closedLoop({ speed: 0.5 }, load);
    expect(half.outputTokensPerSecond / full.outputTokensPerSecond).toBeCloseTo(0.5, 6);
    expect(half.meanTpotMs / full.meanTpotMs).toBeCloseTo(2, 6);
  });
});

describe('the embedding engine model', () => {
  it('computes a burst of inputs in fewer steps than inputs, at most max_num_seqs a step', () => {
    const { steps, doneAt } = simulateEmbeddings({ maxNumSeqs: 8 }, Array.from({ length: 100 }, () => ({ at: 0, tokens: 24 })));
    expect(steps).toHaveLength(13);
    expect(Math.max(...steps.map((step) => step.sequences))).toBe(8);
    expect(doneAt.filter((at) => at !== undefined)).toHaveLength(100);
  });

  it("takes longer for a step with more tokens, up to max_num_batched_tokens; an input longer than that runs alone", () => {
    const short = simulateEmbeddings({}, Array.from({ length: 10 }, () => ({ at: 0, tokens: 10 }))).steps;
    const long = simulateEmbeddings({}, Array.from({ length: 10 }, () => ({ at: 0, tokens: 100 }))).steps;
    expect(short).toHaveLength(1);
    expect(long[0]!.durationMs).toBeGreaterThan(short[0]!.durationMs);
    expect(long[0]!.durationMs).toBeCloseTo((500 + 2.3 * 1000) / 1000, 6);
    const split = simulateEmbeddings({ maxNumBatchedTokens: 250 }, [{ at: 0, tokens: 100 }, { at: 0, tokens: 100 }, { at: 0, tokens: 400 }, { at: 0, tokens: 10 }]).steps;
    expect(split.map((step) => step.prefillTokens)).toEqual([200, 400, 10]);
  });

  it('encodes about 14,200 sentences/s at batches of 32 at speed 1, as all-MiniLM-L6-v2 on a GPU', () => {
    const { doneAt } = simulateEmbeddings({}, Array.from({ length: 32 }, () => ({ at: 0, tokens: 24 })));
    const perSecond = (32 * 1000) / Math.max(...doneAt);
    expect(perSecond).toBeGreaterThan(14_200 * 0.8);
    expect(perSecond).toBeLessThan(14_200 * 1.2);
  });
});
