// Item 11 B: a batch beside live traffic on the continuous-batching engine, with an interactive
// objective (INTERACTIVE_P99_MS; the previous build, which has none, runs with its own protection).
import { mkdtempSync, rmSync } from 'node:fs';
import { nearestRank } from '../src/platform/percentile.js';
import { parsePrometheusText } from '../src/engine/engine-load-metrics.js';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { seededRandom } from '../test/support/discrete-events.js';
import { stop } from '../test/support/processes.js';
import { BENCH_JOB, BENCH_MODEL } from './batch.js';
import { type Build, type Engine, benchEnv, startEngine } from './simulated-engine.js';
import { INTERACTIVE_RATE } from './engine-capacity-derivation.js';
import { median } from './measurements.js';
import { BENCH_API_KEY, startSpool } from './spool.js';

/** Interactive requests per window: at INTERACTIVE_RATE, 40 s; the p99 of 320 is their fourth-slowest. */
const INTERACTIVE_REQUESTS = 320;
/** Long enough to outlast the window at the engine's full speed; cancelled once it is measured. */
const LOAD_LINES = 12_000;
/** Batch lines done before the window opens: the limit has found the engine and the objective has judged. */
const WARM_LINES = 1_500;
const CEILING = 256;

function post(agent: Agent, url: string, payload: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${BENCH_API_KEY}`, 'content-length': Buffer.byteLength(payload) } }, (res) => {
      res.on('data', () => undefined);
      res.on('end', () => (res.statusCode === 200 ? resolve(res.statusCode) : reject(new Error(`an interactive request was answered ${res.statusCode}`))));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * Interactive chat requests to /compat/v1, arriving at random (Poisson, seeded) at INTERACTIVE_RATE:
 * each one's latency, ms. `count` of them, or until `until()` says to stop.
 */
async function interactiveLoad(url: string, count: number, seed: number, until: () => boolean = () => false): Promise<number[]> {
  const agent = new Agent({ keepAlive: true });
  const random = seededRandom(seed);
  const latencies: number[] = [];
  const pending: Array<Promise<void>> = [];
  for (let index = 0; index < count && !until(); index++) {
    const payload = JSON.stringify({ model: BENCH_MODEL, messages: [{ role: 'user', content: `interactive ${index}` }], max_tokens: 16 });
    const sentAt = performance.now();
    pending.push(post(agent, `${url}/compat/v1/chat/completions`, payload).then(() => void latencies.push(performance.now() - sentAt)));
    await new Promise((resolve) => setTimeout(resolve, (-Math.log(1 - random()) * 1000) / INTERACTIVE_RATE));
  }
  await Promise.all(pending);
  agent.destroy();
  return latencies;
}

/** The interactive p99 through this build with nothing else on the engine: what the objective is set from. */
export async function interactiveAlone(work: string, engine: Engine): Promise<number> {
  const dataDir = mkdtempSync(join(work, 'data-'));
  const spool = await startSpool(dataDir, benchEnv(work, engine, CEILING, true, 'this'));
  try {
    await interactiveLoad(spool.url, 20, 1);
    return nearestRank(await interactiveLoad(spool.url, INTERACTIVE_REQUESTS, 2), 0.99);
  } finally {
    await stop(spool.child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export interface LiveCase {
  build: Build;
  gauges: boolean;
  /** Medians of the rounds. */
  interactiveP99Ms: number;
  batchLinesPerSecond: number;
  /** What this build's /metrics said it chose (this build only). */
  batchConcurrency?: number;
  /** The interactive p99 while the batch warmed up, from its start (the objective finding its cap), median of the rounds; absent in runs before it was measured. */
  warmUpP99Ms?: number;
  rounds: Array<{ interactiveP99Ms: number; batchLinesPerSecond: number; batchConcurrency?: number; warmUp?: { answers: number; p99Ms: number } }>;
}

/** Rounds of a large batch with interactive traffic beside it, measured once the batch runs steadily. */
export async function beside(options: { work: string; gauges: boolean; build: Build; buildRoot: string | undefined; objectiveMs: number; rounds: number }): Promise<LiveCase> {
  const rounds: LiveCase['rounds'] = [];
  const lines = Array.from({ length: LOAD_LINES }, (_, index) => JSON.stringify({ custom_id: `load-${index}`, method: 'POST', url: '/v1/chat/completions', body: { model: BENCH_MODEL, messages: [{ role: 'user', content: `Say something true about the number ${index}.` }], max_tokens: 16 } }));
  for (let round = 0; round < options.rounds; round++) {
    const engine = await startEngine('chat');
    const dataDir = mkdtempSync(join(options.work, 'data-'));
    const spool = await startSpool(dataDir, benchEnv(options.work, engine, CEILING, options.gauges, options.build, { INTERACTIVE_P99_MS: String(options.objectiveMs) }), options.buildRoot);
    try {
      const client = new OpenAI({ baseURL: `${spool.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const file = await client.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'load.jsonl'), purpose: 'batch' });
      const batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: BENCH_JOB } as never);
      const completed = async () => (await client.batches.retrieve(batch.id)).request_counts?.completed ?? 0;
      // Live traffic flows from the batch's start, as it would on a service in use: the objective
      // judges only interactive answers, and a window opened with the first of them would measure
      // how fast it finds the cap from an engine the batch filled alone (shown as the warm-up's p99).
      let warm = false;
      const warmUp = interactiveLoad(spool.url, Number.POSITIVE_INFINITY, 50 + round, () => warm);
      while ((await completed()) < WARM_LINES) await new Promise((resolve) => setTimeout(resolve, 200));
      warm = true;
      const warmUpLatencies = await warmUp;
      const before = await completed();
      const startedAt = performance.now();
      const latencies = await interactiveLoad(spool.url, INTERACTIVE_REQUESTS, 100 + round);
      const seconds = (performance.now() - startedAt) / 1000;
      const done = (await completed()) - before;
      const metrics = await (await fetch(`${spool.url}/metrics`, { headers: { authorization: `Bearer ${BENCH_API_KEY}` } })).text();
      const chosen = parsePrometheusText(metrics).find((sample) => sample.name === 'spool_batch_concurrency')?.value;
      await client.batches.cancel(batch.id);
      if ((await client.batches.retrieve(batch.id)).request_counts!.completed >= LOAD_LINES) throw new Error('the batch ended before the window did');
      const entry = {
        interactiveP99Ms: nearestRank(latencies, 0.99),
        batchLinesPerSecond: done / seconds,
        ...(chosen !== undefined ? { batchConcurrency: chosen } : {}),
        warmUp: { answers: warmUpLatencies.length, p99Ms: nearestRank(warmUpLatencies, 0.99) },
      };
      rounds.push(entry);
      process.stdout.write(`live ${options.build} gauges=${options.gauges}: interactive p99 ${entry.interactiveP99Ms.toFixed(0)} ms (objective ${options.objectiveMs}; ${entry.warmUp.p99Ms.toFixed(0)} ms over the ${entry.warmUp.answers} of the warm-up), batch ${entry.batchLinesPerSecond.toFixed(0)} lines/s, batch concurrency ${chosen ?? 'n/a'}\n`);
    } finally {
      await stop(spool.child);
      await engine.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  const concurrencies = rounds.flatMap((entry) => (entry.batchConcurrency === undefined ? [] : [entry.batchConcurrency]));
  return {
    build: options.build,
    gauges: options.gauges,
    interactiveP99Ms: median(rounds.map((entry) => entry.interactiveP99Ms)),
    batchLinesPerSecond: median(rounds.map((entry) => entry.batchLinesPerSecond)),
    ...(concurrencies.length > 0 ? { batchConcurrency: median(concurrencies) } : {}),
    warmUpP99Ms: median(rounds.map((entry) => entry.warmUp!.p99Ms)),
    rounds,
  };
}
