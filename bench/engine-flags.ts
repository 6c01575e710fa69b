// The command line of the engine simulator (bench/engine-upstream.ts):
//   --engine continuous|embeddings  the model: text generation, or an embedding encoder
//   --policy fcfs|priority          waiting order (vLLM's --scheduling-policy); default fcfs
//   --speed S                       throughput multiplier, every cost divided by it; default 1
//                                   (generation), 0.05 (embeddings: see EMBEDDING_SPEED)
//   --max-num-seqs N                sequences in a step at most; default 256
//   --max-num-batched-tokens N      tokens in a step at most; default 2048 (generation), 8192 (embeddings)
//   --kv-cache-tokens N             KV cache size (generation); default 131072
//   --default-max-tokens N          tokens generated when a request sets no max_tokens; default 128
//   --step-us U --sequence-us U --prefill-token-us U --decode-token-us U
//                                   the step costs (test/support/engine-model/engine-config.ts); defaults calibrated
import { EMBEDDING_DEFAULTS, type EngineConfig, GENERATION_DEFAULTS, type StepCosts } from '../test/support/engine-model/engine-config.js';

export type EngineMode = 'continuous' | 'embeddings';

/**
 * The embedding model's default speed. At its calibrated GPU speed (14,100 inputs/s of short
 * sentences at batches of 32) the machine, not the engine, would set the pace: on 2 cores the
 * service under test carries at most about 2,350 lines/s against an upstream answering at once
 * (bench/RESULTS.md, item 2), and the simulator answers embeddings at about the cost of the
 * fixed-latency mode. At a twentieth (about 700 inputs/s at batches of 32, 875 at full batches)
 * the engine is the bottleneck with room to spare. --speed 1 gives the GPU's figures.
 */
export const EMBEDDING_SPEED = 0.05;

export interface EngineOptions {
  readonly mode: EngineMode;
  readonly config: EngineConfig;
  /** Tokens to generate when a request names no max_tokens (max_completion_tokens). */
  readonly defaultMaxTokens: number;
}

const COSTS: Record<string, keyof StepCosts> = {
  '--step-us': 'stepUs',
  '--sequence-us': 'sequenceUs',
  '--prefill-token-us': 'prefillTokenUs',
  '--decode-token-us': 'decodeTokenUs',
};
const GENERATION_ONLY = new Set(['--kv-cache-tokens', '--default-max-tokens', '--decode-token-us']);

/** The options the arguments give; throws with the reason when one is not understood. */
export function engineOptions(args: readonly string[]): EngineOptions {
  const values = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const flag = args[i]!;
    const value = args[i + 1];
    if (!flag.startsWith('--') || value === undefined) throw new Error(`unexpected argument ${JSON.stringify(flag)} (engine flags take a value each)`);
    values.set(flag, value);
    i += 1;
  }
  const mode = values.get('--engine');
  if (mode !== 'continuous' && mode !== 'embeddings') throw new Error(`--engine must be continuous or embeddings, not ${JSON.stringify(mode)}`);
  const defaults = mode === 'continuous' ? GENERATION_DEFAULTS : { ...EMBEDDING_DEFAULTS, speed: EMBEDDING_SPEED };
  const policy = values.get('--policy') ?? defaults.policy;
  if (policy !== 'fcfs' && policy !== 'priority') throw new Error(`--policy must be fcfs or priority, not ${JSON.stringify(policy)}`);
  const costs: Record<keyof StepCosts, number> = { ...defaults.costs };
  let config: EngineConfig = { ...defaults, policy };
  let defaultMaxTokens = 128;
  for (const [flag, value] of values) {
    if (flag === '--engine' || flag === '--policy') continue;
    if (mode === 'embeddings' && GENERATION_ONLY.has(flag)) throw new Error(`${flag} applies to --engine continuous only`);
    const cost = COSTS[flag];
    if (cost) costs[cost] = number(flag, value, 0, false);
    else if (flag === '--speed') config = { ...config, speed: number(flag, value, 0, true) };
    else if (flag === '--max-num-seqs') config = { ...config, maxNumSeqs: number(flag, value, 1, false, true) };
    else if (flag === '--max-num-batched-tokens') config = { ...config, maxNumBatchedTokens: number(flag, value, 1, false, true) };
    else if (flag === '--kv-cache-tokens') config = { ...config, kvCacheTokens: number(flag, value, 16, false, true) };
    else if (flag === '--default-max-tokens') defaultMaxTokens = number(flag, value, 1, false, true);
    else throw new Error(`unknown flag ${flag}`);
  }
  return { mode, config: { ...config, costs }, defaultMaxTokens };
}

function number(flag: string, text: string, least: number, aboveLeast: boolean, integer = false): number {
  const value = Number(text);
  const ok = text.trim() !== '' && Number.isFinite(value) && (aboveLeast ? value > least : value >= least) && (!integer || Number.isInteger(value));
  if (!ok) throw new Error(`${flag} must be ${integer ? 'an integer' : 'a number'} ${aboveLeast ? 'above' : 'of at least'} ${least}, not ${JSON.stringify(text)}`);
  return value;
}
