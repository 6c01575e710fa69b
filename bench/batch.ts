import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { packageRoot } from '../src/platform/package-root.js';
import { THREAD_KINDS, type ThreadKind, byThreadKind, cpuSeconds, cpuSecondsByThread, gaugeSums, median, peakRssMiB, threadCpuBetween } from './measurements.js';
import { startNode, stop } from '../test/support/processes.js';
import { startKafkaDeployment, startKafkaBroker } from './kafka-deployment.js';
import pg from 'pg';
import { startPostgres } from '../test/support/postgres-server.js';
import { eventTimes, startSpool } from './spool.js';

const MIB = 1024 * 1024;
export const BENCH_MODEL = 'bench-model';
export const BENCH_JOB = 'bench-job';

/** The endpoints a benchmark batch is made for. */
export type BenchEndpoint = '/v1/chat/completions' | '/v1/embeddings';

/** Writes a batch input file of requests (chat unless told), one JSON line each, as they come; answers its size in bytes. */
export async function writeBatchInput(path: string, requests: Iterable<{ custom_id: string; body: unknown }>, url: BenchEndpoint = '/v1/chat/completions'): Promise<number> {
  const out = createWriteStream(path);
  for (const { custom_id, body } of requests) {
    const line = JSON.stringify({ custom_id, method: 'POST', url, body });
    if (!out.write(`${line}\n`)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
  }
  await new Promise((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve(undefined))));
  return statSync(path).size;
}

/** A 50,000-line chat batch of short requests (about 200 bytes a line). */
function* shortChatRequests(lines: number): Generator<{ custom_id: string; body: unknown }> {
  for (let index = 0; index < lines; index++) {
    yield {
      custom_id: `request-${index}`,
      body: { model: BENCH_MODEL, messages: [{ role: 'user', content: `Say something true about the number ${index}.` }], max_tokens: 16 },
    };
  }
}

export interface UpstreamStats {
  served: number;
  maxActive: number;
  meanActive: number;
  /** Mean requests in service per quarter second, from the first request. */
  timeline?: number[];
  /** With a prefix cache: approximate prompt tokens, and those found cached, since the last read. */
  promptTokens?: number;
  cachedTokens?: number;
  /** The fixed-latency upstream: arrival-to-answer latency by priority value since the last read. */
  latencyByPriority?: Record<string, { count: number; meanMs: number; p50Ms: number; p95Ms: number; maxMs: number }>;
}

export interface Upstream {
  readonly url: string;
  /** Each read starts a new window. */
  stats(): Promise<UpstreamStats>;
  stop(): Promise<void>;
}

/** The upstream's model of prompts: its prefix cache's budget and the prefill time of an uncached token. */
export interface PrefixCacheModel {
  cacheTokens: number;
  prefillUsPerToken: number;
}

/** The local OpenAI-compatible upstream (bench/upstream.ts) in its own process. */
export async function startUpstream(latencyMs: number, concurrency: number, policy: 'fcfs' | 'priority' = 'fcfs', prefix?: PrefixCacheModel): Promise<Upstream> {
  const args = [String(latencyMs), String(concurrency), '--policy', policy];
  if (prefix) args.push('--prefix-cache-tokens', String(prefix.cacheTokens), '--prefill-us-per-token', String(prefix.prefillUsPerToken));
  const { child, match } = await startNode(join(packageRoot, 'dist/bench/upstream.js'), args, {}, /listening on (\d+)/);
  const url = `http://127.0.0.1:${match[1]}`;
  return {
    url,
    stats: async () => (await (await fetch(`${url}/stats`)).json()) as UpstreamStats,
    stop: () => stop(child),
  };
}

/** An embeddings batch of one short sentence a line (about 150 bytes a line; the answers are about 8 KB). */
function* shortEmbeddingRequests(lines: number): Generator<{ custom_id: string; body: unknown }> {
  for (let index = 0; index < lines; index++) {
    yield { custom_id: `request-${index}`, body: { model: BENCH_MODEL, input: `A sentence to embed about the number ${index} and what is true of it.` } };
  }
}

/** One POST on a kept-alive connection; resolves with the status once the answer is parsed. */
function post(agent: Agent, url: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        JSON.parse(Buffer.concat(chunks).toString('utf8'));
        resolve(res.statusCode ?? 0);
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * The baseline: a bare client loop sending every line's body straight to the upstream,
 * `concurrency` at a time, with node:http on kept-alive connections (the cheapest Node client).
 */
async function bareLoop(upstream: string, bodies: readonly string[], concurrency: number, endpoint: BenchEndpoint): Promise<{ seconds: number; cpuSeconds: number }> {
  const agent = new Agent({ keepAlive: true });
  let next = 0;
  let failed = 0;
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++]!;
        if ((await post(agent, `${upstream}${endpoint}`, body)) !== 200) failed += 1;
      }
    }),
  );
  agent.destroy();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = process.cpuUsage(cpuBefore);
  if (failed > 0) throw new Error(`the bare loop saw ${failed} failed requests`);
  return { seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

export interface SpoolBatchRun {
  /** Upload started to output file downloaded. */
  seconds: number;
  /** Seconds per phase, from the client's clock (upload, download) and the log's timestamps. */
  phases: { upload: number; validate: number; run: number; finalize: number; download: number };
  peakRssMiB: number;
  /** Spool's CPU (user + system, every thread; on Kafka every process's) from the upload's start to the download's end, s. */
  cpuSeconds?: number;
  /** On the embedded default: the same by kind of thread (the main thread, the engine I/O thread, V8's helpers, libuv's pool), s. */
  cpuByThread?: Record<ThreadKind, number>;
}

/** Spool's environment for a batch against the upstream: the embedded default plus the upstream as engine. */
export function benchJobEnv(work: string, upstream: string, concurrency: number): Record<string, string> {
  const jobsFile = join(work, 'jobs.json');
  writeFileSync(jobsFile, JSON.stringify([{ job_id: BENCH_JOB, model: BENCH_MODEL, use_case: 'benchmark', sla: '24h', price_1m_tokens: 0.1 }]));
  return { ENGINE_BASE_URL: `${upstream}/v1`, ENGINE_MODELS: BENCH_MODEL, ENGINE_CONCURRENCY: String(concurrency), JOBS_FILE: jobsFile };
}

/** One batch through the whole service with the official client: upload, create, wait, download. */
export async function runSpoolBatch(url: string, input: string, lines: number, endpoint = '/v1/chat/completions'): Promise<Omit<SpoolBatchRun, 'peakRssMiB'>> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 600_000 });
  const started = process.hrtime.bigint();
  const file = await client.files.create({ file: createReadStream(input), purpose: 'batch' });
  const uploaded = process.hrtime.bigint();
  let batch = await client.batches.create({ input_file_id: file.id, endpoint, completion_window: 'unlimited', job_id: BENCH_JOB } as never);
  while (!['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    batch = await client.batches.retrieve(batch.id);
  }
  if (batch.status !== 'completed' || !batch.output_file_id) throw new Error(`batch ended ${batch.status}: ${JSON.stringify(batch.errors)}`);
  const finished = process.hrtime.bigint();
  const output = await (await client.files.content(batch.output_file_id)).text();
  const ended = process.hrtime.bigint();
  // Checked after the clock stopped: every line answered exactly once.
  const ids = new Set(output.split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { custom_id: string }).custom_id));
  if (ids.size !== lines || batch.error_file_id) throw new Error(`the output holds ${ids.size} of ${lines} lines (error file: ${batch.error_file_id})`);
  const seconds = (from: bigint, to: bigint) => Number(to - from) / 1e9;
  return {
    seconds: seconds(started, ended),
    phases: { upload: seconds(started, uploaded), validate: 0, run: 0, finalize: 0, download: seconds(finished, ended) },
  };
}

/** Phases between upload and download, from the log's own timestamps. */
function logPhases(dataDir: string): { validate: number; run: number; finalize: number } {
  const times = eventTimes(dataDir);
  const at = (type: string, which: 'first' | 'last') => times.get(type)?.[which] ?? NaN;
  const created = at('BatchCreated', 'first');
  const validated = at('BatchValidated', 'first');
  const lastLine = Math.max(at('LineCompleted', 'last'), at('LineFailed', 'last') || 0);
  const completed = at('BatchCompleted', 'first');
  return { validate: (validated - created) / 1000, run: (lastLine - validated) / 1000, finalize: (completed - lastLine) / 1000 };
}

/**
 * One batch through a fresh service on the embedded default in dataDir: the client's times, the
 * phases from the log, and the process's peak RSS.
 */
export async function spoolBatchOnEmbedded(dataDir: string, env: Record<string, string>, input: string, lines: number, build?: string, endpoint = '/v1/chat/completions'): Promise<SpoolBatchRun> {
  const service = await startSpool(dataDir, env, build);
  let run: Omit<SpoolBatchRun, 'peakRssMiB'>;
  let rss: number;
  let cpu: number;
  let byThread: Record<ThreadKind, number>;
  try {
    const pid = service.child.pid!;
    const cpuBefore = cpuSeconds(pid);
    const threadsBefore = cpuSecondsByThread(pid);
    run = await runSpoolBatch(service.url, input, lines, endpoint);
    cpu = cpuSeconds(pid) - cpuBefore;
    byThread = threadCpuBetween(threadsBefore, cpuSecondsByThread(pid));
  } finally {
    rss = peakRssMiB(service.child.pid!);
    await stop(service.child);
  }
  Object.assign(run.phases, logPhases(dataDir));
  return { ...run, peakRssMiB: rss, cpuSeconds: cpu, cpuByThread: byThread };
}

export interface BatchBenchResult {
  rounds: number;
  lines: number;
  /** Absent: chat completions. */
  endpoint?: BenchEndpoint;
  inputMiB: number;
  latencyMs: number;
  concurrency: number;
  baselineLinesPerSecond: number;
  spoolLinesPerSecond: number;
  /** Median of the per-round ratios. */
  ratio: number;
  phases: SpoolBatchRun['phases'];
  spoolPeakRssMiB: number;
  /** Mean requests in service at the upstream, from its first request to its last answer. */
  baselineInFlight: number;
  spoolInFlight: number;
  events: number;
  /**
   * CPU per 1,000 lines, ms (medians): Spool's process over the batch (on Kafka, all of its processes), and the bare
   * loop's own process over its requests, the cost a client of the engine cannot avoid.
   */
  cpuMsPerThousand?: { baseline: number; spool?: number; spoolByThread?: Record<ThreadKind, number> };
  /** On Kafka: the chunks each inference processor ran in the last round. */
  kafka?: { chunksPerInferenceProcessor: number[] };
  /** Beside a previous build (BENCH_PREVIOUS_BUILD): this build's rounds against its, pair by pair. */
  paired?: PairedRounds;
}

/**
 * Items 1 and 2: a batch of `lines` chat requests through the whole service on the embedded
 * default, against a bare loop sending the same requests to the same upstream at the same
 * concurrency, side by side in every round. `keepLog` receives the data directory of the last
 * round before it is deleted (the replay benchmark rebuilds read models from that log).
 */
export async function benchBatch(options: {
  lines: number;
  latencyMs: number;
  concurrency: number;
  rounds: number;
  keepLog?: (dataDir: string) => Promise<void>;
  /** More environment for the service (e.g. NODE_OPTIONS). */
  spoolEnv?: Record<string, string>;
  /** Run the scaled-out shape on a Kafka broker instead of the embedded default. */
  kafka?: boolean;
  /** With `kafka`: the event log in PostgreSQL (a server started here, a fresh database each round) instead of a shared SQLite file. */
  eventStore?: 'postgres';
  /** Spool's ENGINE_CONCURRENCY when it differs from the upstream's slots (it is not told them). */
  engineConcurrency?: number;
  /** Another built checkout of Spool to run instead of this one (BENCH_PREVIOUS_BUILD). */
  build?: string;
  /** Embeddings lines instead of chat ones (on the embedded default). */
  endpoint?: BenchEndpoint;
}): Promise<BatchBenchResult> {
  const endpoint = options.endpoint ?? '/v1/chat/completions';
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-batch-'));
  const broker = options.kafka ? await startKafkaBroker({ dir: join(work, 'kafka') }) : undefined;
  const postgres = options.kafka && options.eventStore === 'postgres' ? await startPostgres('spool_bench_batch') : undefined;
  let spread: number[] = [];
  try {
    const input = join(work, 'input.jsonl');
    const size = await writeBatchInput(input, endpoint === '/v1/embeddings' ? shortEmbeddingRequests(options.lines) : shortChatRequests(options.lines), endpoint);
    const bodies = readFileSync(input, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.stringify((JSON.parse(line) as { body: unknown }).body));
    const baseline: number[] = [];
    const spool: SpoolBatchRun[] = [];
    const ratios: number[] = [];
    const baselineCpu: number[] = [];
    /** CPU seconds over the batch as ms per 1,000 lines. */
    const perThousandLines = (seconds: number) => (seconds * 1e6) / options.lines;
    const inFlight: Array<{ baseline: number; spool: number }> = [];
    let events = 0;
    for (let round = 0; round < options.rounds; round++) {
      const upstream = await startUpstream(options.latencyMs, options.concurrency);
      try {
        const { seconds: bare, cpuSeconds: bareCpu } = await bareLoop(upstream.url, bodies, options.concurrency, endpoint);
        baseline.push(bare);
        baselineCpu.push(bareCpu);
        const bareStats = await upstream.stats();
        const dataDir = mkdtempSync(join(work, 'data-'));
        const database = postgres ? await freshDatabase(postgres.url, `spool_round_${round}`) : undefined;
        const env = { ...benchJobEnv(work, upstream.url, options.engineConcurrency ?? options.concurrency), ...options.spoolEnv, ...(database ? { EVENTSTORE_URL: database } : {}) };
        let run: SpoolBatchRun;
        if (broker) {
          const deployment = await startKafkaDeployment(dataDir, env, options.engineConcurrency ?? options.concurrency, broker, options.build);
          let client: Omit<SpoolBatchRun, 'peakRssMiB'>;
          let rss: number;
          try {
            // BENCH_TIMELINE=1: each inference processor's learned limit, engine requests in flight
            // and batch concurrency, read from its /metrics every 250 ms while the batch runs.
            const gauges: string[] = [];
            const sampling = process.env.BENCH_TIMELINE
              ? setInterval(() => {
                  void Promise.all(
                    ['inference-1', 'inference-2'].map(async (name) => {
                      const read = gaugeSums(await (await fetch(`${deployment.urls[name]}/metrics`)).text());
                      return `${read('spool_engine_concurrency_limit')}/${read('spool_engine_requests_in_flight')}/${read('spool_batch_concurrency')}/${read('spool_scheduler_queue_depth')}`;
                    }),
                  ).then((values) => gauges.push(values.join(' ')), () => undefined);
                }, 250)
              : undefined;
            const cpuBefore = deployment.cpuSeconds();
            client = await runSpoolBatch(deployment.url, input, options.lines);
            // Every process's CPU over the batch (the relay's and the API's included), as on the embedded default.
            const cpuAfter = deployment.cpuSeconds();
            const byProcess = Object.keys(cpuAfter).map((name) => [name, cpuAfter[name]! - (cpuBefore[name] ?? 0)] as const);
            client = { ...client, cpuSeconds: byProcess.reduce((sum, [, seconds]) => sum + seconds, 0) };
            process.stdout.write(`CPU per 1,000 lines by process: ${byProcess.map(([name, seconds]) => `${name} ${perThousandLines(seconds).toFixed(0)} ms`).join(', ')}\n`);
            if (sampling) {
              clearInterval(sampling);
              process.stdout.write(`gauges per 250 ms (limit/in flight/batch concurrency/queued, inference-1 inference-2):\n${gauges.join('\n')}\n`);
            }
            spread = await deployment.inferenceHandled();
          } finally {
            rss = Math.max(...Object.values(deployment.peakRss()));
            await deployment.stop();
          }
          // The phases come from the log's event times.
          Object.assign(client.phases, database ? await postgresPhases(database) : logPhases(dataDir));
          run = { ...client, peakRssMiB: rss };
        } else {
          run = await spoolBatchOnEmbedded(dataDir, env, input, options.lines, options.build, endpoint);
        }
        const stats = await upstream.stats();
        if (stats.maxActive > options.concurrency || bareStats.maxActive > options.concurrency) throw new Error(`the upstream held ${stats.maxActive} requests at once`);
        if (stats.served !== options.lines || bareStats.served !== options.lines) throw new Error(`the upstream served ${bareStats.served} and ${stats.served} requests, not ${options.lines}`);
        inFlight.push({ baseline: bareStats.meanActive, spool: stats.meanActive });
        // BENCH_TIMELINE=1: where a side loses requests in service (the start, the steady run, the end).
        if (process.env.BENCH_TIMELINE) for (const [side, of] of [['bare', bareStats], ['spool', stats]] as const) process.stdout.write(`timeline ${side} (per 250 ms): ${(of.timeline ?? []).map((value) => value.toFixed(0)).join(' ')}\n`);
        events = database ? await eventCount(database) : [...eventTimes(dataDir).values()].reduce((sum, row) => sum + row.count, 0);
        spool.push(run);
        ratios.push(bare / run.seconds);
        process.stdout.write(
          `batch ${options.lines} lines, ${options.latencyMs} ms: bare ${(options.lines / bare).toFixed(0)}/s, spool ${(options.lines / run.seconds).toFixed(0)}/s ${JSON.stringify(run.phases)} rss ${run.peakRssMiB.toFixed(0)} MiB, in flight ${bareStats.meanActive.toFixed(1)} vs ${stats.meanActive.toFixed(1)}${run.cpuSeconds === undefined ? '' : `, CPU per 1,000: bare ${perThousandLines(baselineCpu.at(-1)!).toFixed(0)} ms, spool ${perThousandLines(run.cpuSeconds).toFixed(0)} ms`}${run.cpuByThread ? ` (${THREAD_KINDS.map((kind) => `${kind} ${perThousandLines(run.cpuByThread![kind]).toFixed(0)}`).join(', ')})` : ''}\n`,
        );
        if (round === options.rounds - 1 && options.keepLog) await options.keepLog(dataDir);
        rmSync(dataDir, { recursive: true, force: true });
      } finally {
        await upstream.stop();
      }
    }
    const phase = (name: keyof SpoolBatchRun['phases']) => median(spool.map((run) => run.phases[name]));
    return {
      rounds: options.rounds,
      lines: options.lines,
      ...(endpoint === '/v1/chat/completions' ? {} : { endpoint }),
      inputMiB: size / MIB,
      latencyMs: options.latencyMs,
      concurrency: options.concurrency,
      baselineLinesPerSecond: options.lines / median(baseline),
      spoolLinesPerSecond: options.lines / median(spool.map((run) => run.seconds)),
      ratio: median(ratios),
      phases: { upload: phase('upload'), validate: phase('validate'), run: phase('run'), finalize: phase('finalize'), download: phase('download') },
      spoolPeakRssMiB: median(spool.map((run) => run.peakRssMiB)),
      baselineInFlight: median(inFlight.map((entry) => entry.baseline)),
      spoolInFlight: median(inFlight.map((entry) => entry.spool)),
      events,
      cpuMsPerThousand: {
        baseline: perThousandLines(median(baselineCpu)),
        ...(spool.every((run) => run.cpuSeconds !== undefined) ? { spool: perThousandLines(median(spool.map((run) => run.cpuSeconds!))) } : {}),
        ...(spool.every((run) => run.cpuByThread !== undefined) ? { spoolByThread: byThreadKind((kind) => perThousandLines(median(spool.map((run) => run.cpuByThread![kind])))) } : {}),
      },
      ...(broker ? { kafka: { chunksPerInferenceProcessor: spread } } : {}),
    };
  } finally {
    await broker?.kill();
    await postgres?.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * This build's rounds against the previous build's, pair by pair (the two rounds run one after
 * the other): on a shared machine a round's figures move by ±15% with the minute, more than most
 * changes, while the two rounds of a pair share their minute. Each figure: the mean of the pairs'
 * changes in percent (this build's against the previous one's; negative is less), the half-width
 * of its 95% interval (Student's t: with three pairs it reaches 4.3 standard errors each way, and
 * in three pairs two builds of the same service code read 8% apart with a standard error of 2.6),
 * and the pairs in which this build did better.
 */
export interface PairedRounds {
  readonly pairs: number;
  readonly linesPerSecond: PairedChange;
  /** Spool's CPU per 1,000 lines (on Kafka, every process's). */
  readonly cpuPerLine?: PairedChange;
}

export interface PairedChange {
  readonly meanPercent: number;
  /** The mean's 95% interval is meanPercent ± this (NaN with one pair, null once stored). */
  readonly interval95Percent: number;
  /** Pairs in which this build did better (more lines per second, less CPU a line). */
  readonly better: number;
}

/** Student's t at 97.5% for 1 to 30 degrees of freedom; 1.96 beyond. */
const T_975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042];

/** The pairs' changes of one figure; `better` says which way is better. */
function pairedChange(current: readonly number[], previous: readonly number[], better: 'higher' | 'lower'): PairedChange {
  const changes = current.map((value, index) => 100 * (value / previous[index]! - 1));
  const mean = changes.reduce((sum, change) => sum + change, 0) / changes.length;
  const variance = changes.length > 1 ? changes.reduce((sum, change) => sum + (change - mean) ** 2, 0) / (changes.length - 1) : NaN;
  const freedom = changes.length - 1;
  return {
    meanPercent: mean,
    interval95Percent: freedom >= 1 ? (T_975[freedom - 1] ?? 1.96) * Math.sqrt(variance / changes.length) : NaN,
    better: changes.filter((change) => (better === 'higher' ? change > 0 : change < 0)).length,
  };
}

/** Pairs round i of `current` with round i of `previous` (each a run of one round). */
export function pairedRounds(current: readonly BatchBenchResult[], previous: readonly BatchBenchResult[]): PairedRounds {
  const pairs = Math.min(current.length, previous.length);
  const [these, those] = [current.slice(0, pairs), previous.slice(0, pairs)];
  const cpu = (runs: readonly BatchBenchResult[]) => runs.map((run) => run.cpuMsPerThousand?.spool);
  const [thisCpu, thatCpu] = [cpu(these), cpu(those)];
  return {
    pairs,
    linesPerSecond: pairedChange(
      these.map((run) => run.spoolLinesPerSecond),
      those.map((run) => run.spoolLinesPerSecond),
      'higher',
    ),
    ...(thisCpu.every((value) => value !== undefined) && thatCpu.every((value) => value !== undefined)
      ? { cpuPerLine: pairedChange(thisCpu as number[], thatCpu as number[], 'lower') }
      : {}),
  };
}

/**
 * Runs of one round each, taken as one run of as many rounds: each figure the median of the
 * rounds' (the ratio the median of their ratios, as within a run); the chunk spread of the last.
 */
export function medianOfRounds(runs: readonly BatchBenchResult[]): BatchBenchResult {
  const last = runs[runs.length - 1]!;
  const of = (figure: (run: BatchBenchResult) => number) => median(runs.map(figure));
  const phase = (name: keyof SpoolBatchRun['phases']) => of((run) => run.phases[name]);
  const spoolCpu = {
    ...(runs.every((run) => run.cpuMsPerThousand?.spool !== undefined) ? { spool: of((run) => run.cpuMsPerThousand!.spool!) } : {}),
    ...(runs.every((run) => run.cpuMsPerThousand?.spoolByThread !== undefined) ? { spoolByThread: byThreadKind((kind) => of((run) => run.cpuMsPerThousand!.spoolByThread![kind])) } : {}),
  };
  return {
    ...last,
    rounds: runs.reduce((sum, run) => sum + run.rounds, 0),
    baselineLinesPerSecond: of((run) => run.baselineLinesPerSecond),
    spoolLinesPerSecond: of((run) => run.spoolLinesPerSecond),
    ratio: of((run) => run.ratio),
    phases: { upload: phase('upload'), validate: phase('validate'), run: phase('run'), finalize: phase('finalize'), download: phase('download') },
    spoolPeakRssMiB: of((run) => run.spoolPeakRssMiB),
    baselineInFlight: of((run) => run.baselineInFlight),
    spoolInFlight: of((run) => run.spoolInFlight),
    cpuMsPerThousand: { baseline: of((run) => run.cpuMsPerThousand?.baseline ?? NaN), ...spoolCpu },
  };
}

/** A new database on the server `url` names: its connection string. */
async function freshDatabase(url: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const fresh = new URL(url);
  fresh.pathname = `/${name}`;
  return fresh.toString();
}

/** The phases of logPhases, from the event times of a PostgreSQL log. */
async function postgresPhases(url: string): Promise<{ validate: number; run: number; finalize: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ type: string; first: string; last: string }>(
      `SELECT type, min(recorded_at) AS first, max(recorded_at) AS last FROM spool_events
        WHERE type IN ('BatchCreated', 'BatchValidated', 'LineCompleted', 'LineFailed', 'BatchCompleted') GROUP BY type`,
    );
    const at = (type: string, which: 'first' | 'last') => Number(rows.find((row) => row.type === type)?.[which] ?? NaN);
    const created = at('BatchCreated', 'first');
    const validated = at('BatchValidated', 'first');
    const lastLine = Math.max(at('LineCompleted', 'last'), at('LineFailed', 'last') || 0);
    const completed = at('BatchCompleted', 'first');
    return { validate: (validated - created) / 1000, run: (lastLine - validated) / 1000, finalize: (completed - lastLine) / 1000 };
  } finally {
    await client.end();
  }
}

async function eventCount(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number((await client.query<{ count: string }>('SELECT count(*) AS count FROM spool_events')).rows[0]!.count);
  } finally {
    await client.end();
  }
}
