// What a continuous-batching engine can give batch work at an interactive objective, derived from
// the engine model itself (test/support/engine-model) in simulated time: for each batch concurrency
// n, n batch requests kept in the engine beside interactive requests arriving at random (Poisson,
// seeded), the interactive p99 and the batch's answers per second; the capacity at the objective is
// the most batch throughput among the n whose interactive p99 stays within it.
import { DiscreteEvents, seededRandom } from '../test/support/discrete-events.js';
import { nearestRank } from '../src/platform/percentile.js';
import { ContinuousBatchingEngine } from '../test/support/engine-model/continuous-batching-engine.js';
import { GENERATION_DEFAULTS } from '../test/support/engine-model/engine-config.js';
import { MIN_PROMPT_TOKENS } from './generation-route.js';
import { promptText, promptTokens } from './prefix-cache.js';

/** The benchmark's chat engine (ENGINES.chat) and requests: 64 sequences at most, 16 tokens an answer. */
const MAX_NUM_SEQS = 64;
const MAX_TOKENS = 16;
/** Interactive requests per second beside the batch (the live-traffic runs send as many). */
export const INTERACTIVE_RATE = 8;
/** The objective, as a user would set it: this much above what interactive requests see alone. */
export const OBJECTIVE_FACTOR = 1.3;

export interface ObjectiveDerivation {
  /** Interactive p99 measured through Spool with no batch (ms), and the model's own alone (ms). */
  measuredAloneP99Ms: number;
  modelAloneP99Ms: number;
  /** What Spool and HTTP add to an engine's latency: the difference. */
  overheadMs: number;
  /** OBJECTIVE_FACTOR × the measured alone p99. */
  objectiveMs: number;
  /** The model's interactive p99 and batch throughput at each batch concurrency. */
  points: Array<{ concurrency: number; interactiveP99Ms: number; batchPerSecond: number }>;
  /** The largest batch throughput whose interactive p99 (plus the overhead) meets the objective, and where. */
  capacity: number;
  capacityConcurrency: number;
  /** The engine's batch throughput with nothing else beside it, at its full batch. */
  fullBatchPerSecond: number;
}

const tokensOf = (content: string) => Math.max(MIN_PROMPT_TOKENS, promptTokens(promptText({ messages: [{ role: 'user', content }] })));

/** n batch requests kept in the engine, interactive ones arriving at INTERACTIVE_RATE, for `untilMs` of simulated time. */
function simulate(concurrency: number, interactive: boolean, untilMs = 240_000): { interactiveP99Ms: number; batchPerSecond: number } {
  const clock = new DiscreteEvents();
  const engine = new ContinuousBatchingEngine({ ...GENERATION_DEFAULTS, maxNumSeqs: MAX_NUM_SEQS }, clock);
  const random = seededRandom(11);
  const from = untilMs / 4;
  let batchAnswers = 0;
  const latencies: number[] = [];
  let index = 0;
  const sendBatch = () => {
    const promptTokens = tokensOf(`Say something true about the number ${index++}.`);
    engine.submit({
      promptTokens,
      maxTokens: MAX_TOKENS,
      onFinish: () => {
        if (clock.now >= from) batchAnswers += 1;
        clock.after(0, sendBatch);
      },
    });
  };
  const arrive = () => {
    const at = clock.now;
    engine.submit({ promptTokens: tokensOf(`interactive ${index++}`), maxTokens: MAX_TOKENS, onFinish: () => at >= from && latencies.push(clock.now - at) });
    clock.after((-Math.log(1 - random()) * 1000) / INTERACTIVE_RATE, arrive);
  };
  for (let i = 0; i < concurrency; i++) clock.at(0, sendBatch);
  if (interactive) clock.at(0, arrive);
  clock.runUntil(untilMs);
  return { interactiveP99Ms: nearestRank(latencies, 0.99), batchPerSecond: (batchAnswers * 1000) / (untilMs - from) };
}

export function deriveObjectiveCapacity(options: { aloneP99Ms: number }): ObjectiveDerivation {
  const modelAloneP99Ms = simulate(0, true).interactiveP99Ms;
  const overheadMs = Math.max(0, options.aloneP99Ms - modelAloneP99Ms);
  const objectiveMs = Math.round(OBJECTIVE_FACTOR * options.aloneP99Ms);
  const points = [];
  for (let concurrency = 1; concurrency <= 4 * MAX_NUM_SEQS; concurrency += concurrency < MAX_NUM_SEQS + 8 ? 1 : 16) points.push({ concurrency, ...simulate(concurrency, true) });
  const within = points.filter((point) => point.interactiveP99Ms + overheadMs <= objectiveMs);
  const best = within.reduce((a, b) => (b.batchPerSecond > a.batchPerSecond ? b : a), { concurrency: 0, batchPerSecond: 0, interactiveP99Ms: 0 });
  return {
    measuredAloneP99Ms: options.aloneP99Ms,
    modelAloneP99Ms,
    overheadMs,
    objectiveMs,
    points,
    capacity: best.batchPerSecond,
    capacityConcurrency: best.concurrency,
    fullBatchPerSecond: simulate(MAX_NUM_SEQS, false).batchPerSecond,
  };
}
