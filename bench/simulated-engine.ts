// The continuous-batching engine the batching benchmarks run against (bench/upstream.ts --engine:
// a stand-in for a vLLM server, which cannot run on these machines) and how Spool is pointed at it.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../src/platform/package-root.js';
import { BENCH_JOB, BENCH_MODEL } from './batch.js';
import { startNode, stop } from '../test/support/processes.js';

export type EngineKind = 'chat' | 'embeddings';

/** The engines: small enough for two shared cores to drive, shaped as the calibrated ones (batching pays). */
export const ENGINES: Record<EngineKind, { args: string[]; maxNumSeqs: number; lines: number; endpoint: string }> = {
  // vLLM-like generation (Llama-3.1-8B on an A100, test/support/engine-model/engine-config.ts), 16 tokens an answer.
  chat: { args: ['--engine', 'continuous', '--max-num-seqs', '64'], maxNumSeqs: 64, lines: 3_000, endpoint: '/v1/chat/completions' },
  // all-MiniLM-L6-v2-like embeddings at a fiftieth of a GPU's speed: about 530 inputs/s at full batches, 220 at batches of 8.
  embeddings: { args: ['--engine', 'embeddings', '--max-num-seqs', '64', '--speed', '0.02'], maxNumSeqs: 64, lines: 8_000, endpoint: '/v1/embeddings' },
};

export const body = (kind: EngineKind, index: number) =>
  kind === 'chat'
    ? { model: BENCH_MODEL, messages: [{ role: 'user', content: `Say something true about the number ${index}.` }], max_tokens: 16 }
    : { model: BENCH_MODEL, input: `Sentence ${index} is about the weather in a small town by the sea.` };

export interface Engine {
  readonly url: string;
  stats(): Promise<{ served: number; meanBatchSize: number; meanActive: number }>;
  stop(): Promise<void>;
}

export async function startEngine(kind: EngineKind): Promise<Engine> {
  const { child, match } = await startNode(join(packageRoot, 'dist/bench/upstream.js'), ENGINES[kind].args, {}, /listening on (\d+)/);
  const url = `http://127.0.0.1:${match[1]}`;
  return { url, stats: async () => (await (await fetch(`${url}/stats`)).json()) as { served: number; meanBatchSize: number; meanActive: number }, stop: () => stop(child) };
}

export type Build = 'this' | 'previous';

/** FLEET_FILE for a run: a vLLM replica, its gauges read (by default on this build; named on the previous one) or not. */
function fleetFile(work: string, engine: Engine, ceiling: number, gauges: boolean, build: Build): string {
  const path = join(work, `fleet-${build}-${gauges}.json`);
  const metrics = gauges ? (build === 'previous' ? { metrics_url: `${engine.url}/metrics` } : {}) : build === 'this' ? { metrics_url: false } : {};
  writeFileSync(path, JSON.stringify({ models: { [BENCH_MODEL]: { replicas: [{ kind: 'vllm', base_url: `${engine.url}/v1`, concurrency: ceiling, ...metrics }] } } }));
  return path;
}

export function benchEnv(work: string, engine: Engine, ceiling: number, gauges: boolean, build: Build, extra: Record<string, string> = {}): Record<string, string> {
  const jobsFile = join(work, 'jobs.json');
  writeFileSync(jobsFile, JSON.stringify([{ job_id: BENCH_JOB, model: BENCH_MODEL, use_case: 'benchmark', sla: '24h', price_1m_tokens: 0.1 }]));
  return { FLEET_FILE: fleetFile(work, engine, ceiling, gauges, build), JOBS_FILE: jobsFile, ...extra };
}

export async function writeInput(path: string, kind: EngineKind, lines: number): Promise<void> {
  const rows = Array.from({ length: lines }, (_, index) => JSON.stringify({ custom_id: `line-${index}`, method: 'POST', url: ENGINES[kind].endpoint, body: body(kind, index) }));
  writeFileSync(path, `${rows.join('\n')}\n`);
}
