// The engine models run on simulated time: what each request saw and what each step ran, for the
// tests (test/engine-model.test.ts) and for checking the calibration against the published figures.
import { DiscreteEvents } from '../discrete-events.js';
import { ContinuousBatchingEngine, type StepRecord } from './continuous-batching-engine.js';
import { EmbeddingBatchEngine } from './embedding-batch-engine.js';
import { EMBEDDING_DEFAULTS, type EngineConfig, GENERATION_DEFAULTS, type StepCosts } from './engine-config.js';

export type ConfigChanges = Partial<Omit<EngineConfig, 'costs'>> & { readonly costs?: Partial<StepCosts> };

export interface Arrival {
  /** Milliseconds from the start. */
  readonly at: number;
  readonly promptTokens: number;
  readonly maxTokens: number;
  readonly priority?: number;
}

export interface Outcome {
  id: number;
  readonly arrivedAt: number;
  startedAt?: number;
  /** When each token was produced. */
  readonly tokenAt: number[];
  finishedAt?: number;
}

export interface Simulation {
  readonly outcomes: Outcome[];
  readonly steps: StepRecord[];
  readonly counters: ContinuousBatchingEngine['counters'];
}

function withChanges(defaults: EngineConfig, changes: ConfigChanges): EngineConfig {
  return { ...defaults, ...changes, costs: { ...defaults.costs, ...changes.costs } };
}

/** Runs the generation engine until every request has finished (or `untilMs`). */
export function simulateGeneration(changes: ConfigChanges, arrivals: readonly Arrival[], untilMs = 1e9): Simulation {
  const clock = new DiscreteEvents();
  const engine = new ContinuousBatchingEngine(withChanges(GENERATION_DEFAULTS, changes), clock);
  const steps: StepRecord[] = [];
  engine.onStep = (step) => steps.push(step);
  const outcomes: Outcome[] = [];
  for (const arrival of arrivals) {
    clock.at(arrival.at, () => {
      const outcome: Outcome = { id: -1, arrivedAt: clock.now, tokenAt: [] };
      outcome.id = engine.submit({
        ...arrival,
        onStart: () => (outcome.startedAt = clock.now),
        onToken: () => outcome.tokenAt.push(clock.now),
        onFinish: () => (outcome.finishedAt = clock.now),
      });
      outcomes.push(outcome);
    });
  }
  clock.runUntil(untilMs);
  return { outcomes, steps, counters: engine.counters };
}

export interface ClosedLoop {
  /** Generated tokens over the time from the first request to the last answer. */
  readonly outputTokensPerSecond: number;
  /** Mean time per output token after the first (vLLM's TPOT). */
  readonly meanTpotMs: number;
  /** Mean time to the first token. */
  readonly meanTtftMs: number;
  /** Mean sequences a step ran. */
  readonly meanBatch: number;
}

/**
 * `vllm bench serve --max-concurrency C` with fixed lengths: C clients, each sending its next
 * request as soon as the previous one is answered, `requests` in all.
 */
export function closedLoop(changes: ConfigChanges, load: { concurrency: number; promptTokens: number; maxTokens: number; requests: number }): ClosedLoop {
  const clock = new DiscreteEvents();
  const engine = new ContinuousBatchingEngine(withChanges(GENERATION_DEFAULTS, changes), clock);
  const finished: Array<{ arrivedAt: number; firstAt: number; doneAt: number }> = [];
  let sent = 0;
  const send = () => {
    if (sent >= load.requests) return;
    sent += 1;
    const arrivedAt = clock.now;
    let firstAt = 0;
    engine.submit({
      promptTokens: load.promptTokens,
      maxTokens: load.maxTokens,
      onToken: (index) => (firstAt = index === 0 ? clock.now : firstAt),
      onFinish: () => {
        finished.push({ arrivedAt, firstAt, doneAt: clock.now });
        send();
      },
    });
  };
  for (let client = 0; client < load.concurrency; client++) clock.at(0, send);
  clock.runUntil(1e9);
  const span = Math.max(...finished.map((request) => request.doneAt));
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  return {
    outputTokensPerSecond: (finished.length * load.maxTokens * 1000) / span,
    meanTpotMs: mean(finished.map((request) => (request.doneAt - request.firstAt) / (load.maxTokens - 1))),
    meanTtftMs: mean(finished.map((request) => request.firstAt - request.arrivedAt)),
    meanBatch: engine.counters.sequenceSteps / engine.counters.steps,
  };
}

/** Runs the embedding engine over inputs arriving at the given times; answers each input's completion time and the steps. */
export function simulateEmbeddings(changes: ConfigChanges, arrivals: ReadonlyArray<{ at: number; tokens: number }>): { doneAt: number[]; steps: StepRecord[] } {
  const clock = new DiscreteEvents();
  const engine = new EmbeddingBatchEngine(withChanges(EMBEDDING_DEFAULTS, changes), clock);
  const steps: StepRecord[] = [];
  engine.onStep = (step) => steps.push(step);
  const doneAt: number[] = [];
  arrivals.forEach((arrival, index) => clock.at(arrival.at, () => engine.submit({ tokens: arrival.tokens, onDone: () => (doneAt[index] = clock.now) })));
  clock.runUntil(1e9);
  return { doneAt, steps };
}
