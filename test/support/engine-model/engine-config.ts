// The settings of the engine models (test/support/engine-model/continuous-batching-engine.ts,
// test/support/engine-model/embedding-batch-engine.ts) and their defaults, calibrated to published figures: where each
// default comes from is told in those modules' header comments and in bench/FINDINGS.md.
import type { SchedulingPolicy } from './waiting-order.js';

/** What one engine step costs, in microseconds at speed 1. */
export interface StepCosts {
  /** Every step: reading the weights once, launching the kernels. */
  readonly stepUs: number;
  /** Each sequence the step runs: reading its KV cache, sampling. */
  readonly sequenceUs: number;
  /** Each prompt token the step computes (prefill, or recompute after a preemption). */
  readonly prefillTokenUs: number;
  /** Each token the step decodes (one per decoding sequence). */
  readonly decodeTokenUs: number;
}

export interface EngineConfig {
  readonly policy: SchedulingPolicy;
  /** vLLM's max_num_seqs: sequences in the running batch at most. */
  readonly maxNumSeqs: number;
  /** vLLM's max_num_batched_tokens: tokens one step computes at most (prompts are chunked to fit). */
  readonly maxNumBatchedTokens: number;
  /** The KV cache, in tokens (kept in blocks of 16, as vLLM's paged attention does). */
  readonly kvCacheTokens: number;
  /** Multiplies throughput: every cost is divided by it (0.5: a replica half as fast). */
  readonly speed: number;
  readonly costs: StepCosts;
}

/**
 * Llama-3.1-8B-Instruct (bf16) on one A100 40GB under vLLM's defaults for a GPU of under 70 GiB
 * (max_num_seqs 256, max_num_batched_tokens 2048, chunked prefill).
 */
export const GENERATION_DEFAULTS: EngineConfig = {
  policy: 'fcfs',
  maxNumSeqs: 256,
  maxNumBatchedTokens: 2048,
  // 40 GiB × 0.9 (gpu_memory_utilization), less 15 GiB of weights and about 4 GiB of activations
  // and CUDA graphs, leaves about 17 GiB; Llama-3.1-8B keeps 128 KiB of KV a token
  // (32 layers × 8 KV heads × 128 dimensions × K and V × 2 bytes).
  kvCacheTokens: 131_072,
  speed: 1,
  costs: { stepUs: 13_200, sequenceUs: 80, prefillTokenUs: 60, decodeTokenUs: 20 },
};

/** An all-MiniLM-L6-v2-sized BERT (6 layers, 384 dimensions, 22M parameters) on one GPU. */
export const EMBEDDING_DEFAULTS: EngineConfig = {
  policy: 'fcfs',
  maxNumSeqs: 256,
  maxNumBatchedTokens: 8192,
  // An encoder keeps no KV cache between steps.
  kvCacheTokens: 0,
  speed: 1,
  costs: { stepUs: 500, sequenceUs: 0, prefillTokenUs: 2.3, decodeTokenUs: 0 },
};

/** A step's duration in milliseconds. */
export function stepMs(config: EngineConfig, load: { sequences: number; prefillTokens: number; decodeTokens: number }): number {
  const { stepUs, sequenceUs, prefillTokenUs, decodeTokenUs } = config.costs;
  const us = stepUs + sequenceUs * load.sequences + prefillTokenUs * load.prefillTokens + decodeTokenUs * load.decodeTokens;
  return us / 1000 / config.speed;
}
