// Keeping a batching engine full (item 11): Spool against the upstream simulator's continuous-
// batching engine (bench/upstream.ts --engine: a stand-in for a vLLM server, which cannot run on
// these machines, stepping its batch as vLLM's scheduler does), beside a bare loop swept over its
// concurrency, and beside the previous build where BENCH_PREVIOUS_BUILD names one: every round runs
// each side back to back on a fresh engine.
//   A: a batch alone, chat and embeddings, ENGINE_CONCURRENCY at 1× and 4× the engine's
//      max_num_seqs, with and without the engine's gauges;
//   B: a batch beside live traffic, with an interactive objective, against what the engine model
//      can give at that objective (bench/engine-capacity-derivation.ts).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spoolBatchOnEmbedded } from './batch.js';
import { type ObjectiveDerivation, deriveObjectiveCapacity } from './engine-capacity-derivation.js';
import { type LiveCase, beside, interactiveAlone } from './live-traffic.js';
import { median } from './measurements.js';
import { type Build, ENGINES, type Engine, type EngineKind, benchEnv, body, startEngine, writeInput } from './simulated-engine.js';

function post(agent: Agent, url: string, payload: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
      res.on('data', () => undefined);
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** A bare loop keeping `concurrency` requests at the engine for `seconds` (after half a second's warm-up): requests per second. */
async function bareRate(engine: Engine, kind: EngineKind, concurrency: number, seconds: number): Promise<number> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const warmUntil = Date.now() + 500;
  const endAt = warmUntil + seconds * 1000;
  let counted = 0;
  let index = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < endAt) {
        const status = await post(agent, `${engine.url}${ENGINES[kind].endpoint}`, JSON.stringify(body(kind, index++)));
        if (status !== 200) throw new Error(`the bare loop was answered ${status}`);
        const now = Date.now();
        if (now >= warmUntil && now < endAt) counted += 1;
      }
    }),
  );
  agent.destroy();
  return counted / seconds;
}

/** The bare loop's concurrencies: up to the ceiling Spool is given, on either side of the engine's batch. */
function sweep(maxNumSeqs: number, ceiling: number): number[] {
  return [0.125, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4].map((share) => Math.round(share * maxNumSeqs)).filter((value) => value >= 1 && value <= ceiling);
}

export interface AloneCase {
  kind: EngineKind;
  ceilingTimes: 1 | 4;
  gauges: boolean;
  /** Lines per second while the batch runs (its 20th to 95th percentile of lines, from the log; median of the rounds), by build. */
  spool: Partial<Record<Build, number>>;
  /** Of the best bare loop of the same round (median of the rounds' ratios), by build. */
  ratio: Partial<Record<Build, number>>;
  /** Lines per second from the upload's start to the output's last byte, and of the best bare loop. */
  endToEnd: Partial<Record<Build, number>>;
  endToEndRatio: Partial<Record<Build, number>>;
  /** Sequences a step of the engine ran on average while Spool ran the batch, by build. */
  meanBatch: Partial<Record<Build, number>>;
}

export interface AloneSweep {
  kind: EngineKind;
  ceilingTimes: 1 | 4;
  /** Requests per second of the bare loop at each concurrency (medians), and the best. */
  points: Array<{ concurrency: number; rate: number }>;
  best: number;
  bestConcurrency: number;
}

export interface BatchingEngineResult {
  rounds: number;
  builds: Build[];
  previousBuild?: string;
  /** The previous build's commit, where it is a git checkout. */
  previousCommit?: string;
  engines: typeof ENGINES;
  sweeps: AloneSweep[];
  alone: AloneCase[];
  live?: { derivation: ObjectiveDerivation; cases: LiveCase[]; aloneP99Ms: number };
  seconds: number;
  /** Where only one part was run again: the date the other part's figures were measured on. */
  aloneDate?: string;
  liveDate?: string;
  /** And the previous build those kept figures were measured beside. */
  alonePreviousCommit?: string;
  livePreviousCommit?: string;
}

/** Part A's engines and ceilings (times the engine's maximum batch): a case is named `engine:times`, e.g. `embeddings:4`. */
const ALONE_KINDS = ['chat', 'embeddings'] as const;
const ALONE_CEILING_TIMES = [1, 4] as const;
const ALONE_CASES: readonly string[] = ALONE_KINDS.flatMap((kind) => ALONE_CEILING_TIMES.map((times) => `${kind}:${times}`));

/** Item 11, A and B. `previous`: the root of a built checkout of the previous release. */
export async function benchBatchingEngine(options: {
  rounds: number;
  previous?: string;
  parts?: Array<'alone' | 'live'>;
  /** Of part A, only these engines and ceilings (e.g. `embeddings:4`, the engine's maximum times four): more rounds of one case, for a figure that sits at its target. */
  cases?: readonly string[];
}): Promise<BatchingEngineResult> {
  const unknownCase = options.cases?.find((name) => !ALONE_CASES.includes(name));
  if (unknownCase) throw new Error(`no case ${unknownCase} in section 11 (${ALONE_CASES.join(', ')})`);
  const started = Date.now();
  const builds: Build[] = options.previous ? ['this', 'previous'] : ['this'];
  const buildRoot = (build: Build) => (build === 'previous' ? options.previous : undefined);
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-batching-'));
  const parts = new Set(options.parts ?? ['alone', 'live']);
  try {
    const sweeps: AloneSweep[] = [];
    const alone: AloneCase[] = [];
    if (parts.has('alone')) {
      for (const kind of ALONE_KINDS) {
        const { maxNumSeqs, lines, endpoint } = ENGINES[kind];
        const input = join(work, `${kind}.jsonl`);
        await writeInput(input, kind, lines);
        for (const ceilingTimes of ALONE_CEILING_TIMES) {
          if (options.cases && !options.cases.includes(`${kind}:${ceilingTimes}`)) continue;
          const ceiling = ceilingTimes * maxNumSeqs;
          const points = new Map<number, number[]>();
          const cases = [false, true].map((gauges) => ({ gauges, runs: new Map<Build, Array<{ rate: number; ratio: number; batch: number; endToEnd: number; endToEndRatio: number }>>() }));
          for (let round = 0; round < options.rounds; round++) {
            const engine = await startEngine(kind);
            try {
              let best = 0;
              for (const concurrency of sweep(maxNumSeqs, ceiling)) {
                const rate = await bareRate(engine, kind, concurrency, 4);
                points.set(concurrency, [...(points.get(concurrency) ?? []), rate]);
                best = Math.max(best, rate);
              }
              for (const entry of cases) {
                for (const build of builds) {
                  const dataDir = mkdtempSync(join(work, 'data-'));
                  await engine.stats();
                  const run = await spoolBatchOnEmbedded(dataDir, benchEnv(work, engine, ceiling, entry.gauges, build), input, lines, buildRoot(build), endpoint);
                  const stats = await engine.stats();
                  const rate = steadyRate(dataDir);
                  rmSync(dataDir, { recursive: true, force: true });
                  const endToEnd = lines / run.seconds;
                  entry.runs.set(build, [...(entry.runs.get(build) ?? []), { rate, ratio: rate / best, batch: stats.meanBatchSize, endToEnd, endToEndRatio: endToEnd / best }]);
                  process.stdout.write(
                    `batching ${kind} ${ceilingTimes}× gauges=${entry.gauges} ${build}: ${rate.toFixed(0)} lines/s running (${((rate / best) * 100).toFixed(1)}% of the best bare ${best.toFixed(0)}/s), ${endToEnd.toFixed(0)} end to end, batches of ${stats.meanBatchSize.toFixed(1)}\n`,
                  );
                }
              }
            } finally {
              await engine.stop();
            }
          }
          const medians = [...points].map(([concurrency, rates]) => ({ concurrency, rate: median(rates) }));
          const top = medians.reduce((a, b) => (b.rate > a.rate ? b : a));
          sweeps.push({ kind, ceilingTimes, points: medians, best: top.rate, bestConcurrency: top.concurrency });
          for (const entry of cases) {
            const by = <K extends 'rate' | 'ratio' | 'batch' | 'endToEnd' | 'endToEndRatio'>(key: K) => Object.fromEntries([...entry.runs].map(([build, runs]) => [build, median(runs.map((run) => run[key]))]));
            alone.push({ kind, ceilingTimes, gauges: entry.gauges, spool: by('rate'), ratio: by('ratio'), meanBatch: by('batch'), endToEnd: by('endToEnd'), endToEndRatio: by('endToEndRatio') });
          }
        }
      }
    }
    let live: BatchingEngineResult['live'];
    if (parts.has('live')) {
      const engine = await startEngine('chat');
      let aloneP99Ms: number;
      try {
        aloneP99Ms = await interactiveAlone(work, engine);
      } finally {
        await engine.stop();
      }
      const derivation = deriveObjectiveCapacity({ aloneP99Ms });
      const cases = [];
      for (const gauges of [false, true]) {
        for (const build of builds) cases.push(await beside({ work, gauges, build, buildRoot: buildRoot(build), objectiveMs: derivation.objectiveMs, rounds: options.rounds }));
      }
      live = { derivation, cases, aloneP99Ms };
    }
    const previousCommit = options.previous ? commitOf(options.previous) : undefined;
    return { rounds: options.rounds, builds, ...(options.previous ? { previousBuild: options.previous } : {}), ...(previousCommit ? { previousCommit } : {}), engines: ENGINES, sweeps, alone, ...(live ? { live } : {}), seconds: (Date.now() - started) / 1000 };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Lines per second while the batch ran, from the log: between its 20th and 95th percentile line
 * outcome, the rate the engine was kept at once the limit had found it, without the batch's own
 * ends (the upload, validation, the tail of its last chunks and the output), which the
 * end-to-end figure counts. The bare loop's rate is likewise read after a warm-up.
 */
function steadyRate(dataDir: string): number {
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true });
  try {
    const times = db.prepare<[], { at: number }>("SELECT recorded_at AS at FROM events WHERE type IN ('LineCompleted', 'LineFailed') ORDER BY position").all().map((row) => row.at);
    const from = times[Math.floor(0.2 * times.length)]!;
    const to = times[Math.floor(0.95 * times.length)]!;
    return (Math.floor(0.95 * times.length) - Math.floor(0.2 * times.length)) / ((to - from) / 1000);
  } finally {
    db.close();
  }
}

function commitOf(root: string): string | undefined {
  try {
    return execFileSync('git', ['-C', root, 'log', '-1', '--format=%h %s'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}
