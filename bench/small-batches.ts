// Items 12 and 13: many small batches at once, and a service's speed as it ages. Both on the
// embedded default against an upstream that answers at once, so Spool's own cost per batch sets
// the pace; each beside the previous build (BENCH_PREVIOUS_BUILD) in the same run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import OpenAI, { toFile } from 'openai';
import { stop } from '../test/support/processes.js';
import { BENCH_JOB, BENCH_MODEL, benchJobEnv, spoolBatchOnEmbedded, startUpstream, writeBatchInput } from './batch.js';
import { type ThreadKind, byThreadKind, bytesWritten, cpuSeconds, cpuSecondsByThread, median, peakRssMiB, rssMiB, threadCpuBetween } from './measurements.js';
import { startSpool } from './spool.js';

/** Requests in flight at the upstream and Spool's ENGINE_CONCURRENCY: as the pure-overhead batch (2). */
const CONCURRENCY = 64;
/** Batch creations sent at once, as an eval harness with a connection pool would. */
const CREATES_AT_ONCE = 64;
const TERMINAL = ['BatchCompleted', 'BatchFailed', 'BatchExpired', 'BatchCancelled'];

function* chatRequests(prefix: string, lines: number): Generator<{ custom_id: string; body: unknown }> {
  for (let index = 0; index < lines; index++) {
    yield { custom_id: `${prefix}-${index}`, body: { model: BENCH_MODEL, messages: [{ role: 'user', content: `Say something true about ${prefix}, line ${index}.` }], max_tokens: 16 } };
  }
}

const jsonl = (prefix: string, lines: number) =>
  [...chatRequests(prefix, lines)].map(({ custom_id, body }) => JSON.stringify({ custom_id, method: 'POST', url: '/v1/chat/completions', body })).join('\n');

/** Runs `work` over `items`, `width` at a time. */
async function inPool<T, R>(items: readonly T[], width: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const at = next++;
        results[at] = await work(items[at]!);
      }
    }),
  );
  return results;
}

/**
 * Batches ended after `since` in a data directory's embedded log, read as another process would
 * (WAL). Only the log's tail past `since` is read: a count over the whole log, every 100 ms, cost
 * the watcher more CPU with every wave, taken from the two cores Spool runs on, and made a service
 * look slower as it aged.
 */
function endedBatches(dataDir: string, since: number): number {
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true });
  try {
    return (db.prepare(`SELECT count(*) AS n FROM events WHERE position > ? AND type IN (${TERMINAL.map(() => '?').join(',')})`).get(since, ...TERMINAL) as { n: number }).n;
  } finally {
    db.close();
  }
}

/** Per batch, from the log: created to ended, and validated to ended (its run and finalizing), in s. */
function batchSpans(dataDir: string, since: number): { ended: number; firstCreated: number; lastEnded: number; createdToEnded: number[]; validatedToEnded: number[] } {
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true });
  try {
    const rows = db
      .prepare<[number], { stream_name: string; type: string; recorded_at: number }>(
        `SELECT stream_name, type, recorded_at FROM events WHERE position > ? AND type IN ('BatchCreated', 'BatchValidated', ${TERMINAL.map((type) => `'${type}'`).join(',')})`,
      )
      .all(since);
    const byBatch = new Map<string, { created?: number; validated?: number; ended?: number }>();
    for (const row of rows) {
      const entry = byBatch.get(row.stream_name) ?? {};
      if (row.type === 'BatchCreated') entry.created = row.recorded_at;
      else if (row.type === 'BatchValidated') entry.validated = row.recorded_at;
      else entry.ended = row.recorded_at;
      byBatch.set(row.stream_name, entry);
    }
    const spans = [...byBatch.values()].filter((entry) => entry.created !== undefined && entry.ended !== undefined);
    return {
      ended: spans.length,
      firstCreated: Math.min(...spans.map((entry) => entry.created!)),
      lastEnded: Math.max(...spans.map((entry) => entry.ended!)),
      createdToEnded: spans.map((entry) => (entry.ended! - entry.created!) / 1000),
      validatedToEnded: spans.filter((entry) => entry.validated !== undefined).map((entry) => (entry.ended! - entry.validated!) / 1000),
    };
  } finally {
    db.close();
  }
}

const lastPosition = (dataDir: string): number => {
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true });
  try {
    return (db.prepare('SELECT coalesce(max(position), 0) AS p FROM events').get() as { p: number }).p;
  } finally {
    db.close();
  }
};

export interface WaveRun {
  batches: number;
  lines: number;
  /** First BatchCreated to last batch ended, from the log. */
  seconds: number;
  batchesPerSecond: number;
  linesPerSecond: number;
  /** Medians over the wave's batches, s. */
  createdToEnded: number;
  validatedToEnded: number;
  maxCreatedToEnded: number;
  /** Spool's CPU (user + system, all threads) from the first create to the last end, per 1,000 lines, ms. */
  cpuMsPerThousandLines: number;
  /** The same by kind of thread (stored since 2026-12-01). */
  cpuByThread?: Record<ThreadKind, number>;
  /** What Spool handed to write calls over the same span (its log's and read models' pages, files, sockets), per line, KiB. */
  writtenKiBPerLine: number;
  rssMiB: number;
}

/**
 * Uploads `batches` input files of `lines` lines (not timed), then creates every batch at once and
 * waits until all have ended; checks every line came back exactly once.
 */
async function wave(service: { url: string; pid: number; dataDir: string }, tag: string, batches: number, lines: number): Promise<WaveRun> {
  const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 2, timeout: 600_000 });
  const names = Array.from({ length: batches }, (_, index) => `${tag}-${index}`);
  const files = await inPool(names, 16, async (name) => (await client.files.create({ file: await toFile(Buffer.from(jsonl(name, lines)), `${name}.jsonl`), purpose: 'batch' })).id);
  const since = lastPosition(service.dataDir);
  const cpuBefore = cpuSeconds(service.pid);
  const threadsBefore = cpuSecondsByThread(service.pid);
  const writtenBefore = bytesWritten(service.pid);
  const ids = await inPool(files, CREATES_AT_ONCE, async (fileId) => (await client.batches.create({ input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: BENCH_JOB } as never)).id);
  for (const deadline = Date.now() + 3_600_000; endedBatches(service.dataDir, since) < batches; ) {
    if (Date.now() > deadline) throw new Error(`${batches} small batches did not end within an hour`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const cpu = cpuSeconds(service.pid) - cpuBefore;
  const byThread = threadCpuBetween(threadsBefore, cpuSecondsByThread(service.pid));
  const written = bytesWritten(service.pid) - writtenBefore;
  // Checked after the clock stopped: every batch completed with every line, none failed.
  const ended = await inPool(ids, 16, (id) => client.batches.retrieve(id));
  const short = ended.filter((batch) => batch.status !== 'completed' || batch.request_counts?.completed !== lines || batch.request_counts?.failed !== 0);
  if (short.length > 0) throw new Error(`${short.length} of ${batches} batches did not complete every line: ${JSON.stringify(short[0])}`);
  const spans = batchSpans(service.dataDir, since);
  const seconds = (spans.lastEnded - spans.firstCreated) / 1000;
  return {
    batches,
    lines: batches * lines,
    seconds,
    batchesPerSecond: batches / seconds,
    linesPerSecond: (batches * lines) / seconds,
    createdToEnded: median(spans.createdToEnded),
    validatedToEnded: median(spans.validatedToEnded),
    maxCreatedToEnded: Math.max(...spans.createdToEnded),
    cpuMsPerThousandLines: (cpu * 1000) / ((batches * lines) / 1000),
    cpuByThread: byThreadKind((kind) => (byThread[kind] * 1000) / ((batches * lines) / 1000)),
    writtenKiBPerLine: written / 1024 / (batches * lines),
    rssMiB: rssMiB(service.pid),
  };
}

export interface SmallBatchesRound {
  small: WaveRun;
  /** One batch of as many lines as all the small ones, on a fresh service: created to completed. */
  largeLinesPerSecond: number;
  /** small.linesPerSecond / largeLinesPerSecond */
  ratio: number;
}

export interface SmallBatchesResult {
  batches: number;
  lines: number;
  rounds: number;
  thisBuild: SmallBatchesRound[];
  previousBuild?: SmallBatchesRound[];
}

async function smallBatchesRound(options: { batches: number; lines: number; build?: string }): Promise<SmallBatchesRound> {
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-small-'));
  const upstream = await startUpstream(0, CONCURRENCY);
  try {
    const env = benchJobEnv(work, upstream.url, CONCURRENCY);
    const dataDir = mkdtempSync(join(work, 'data-'));
    const spool = await startSpool(dataDir, env, options.build);
    let small: WaveRun;
    try {
      small = await wave({ url: spool.url, pid: spool.child.pid!, dataDir }, 'small', options.batches, options.lines);
    } finally {
      await stop(spool.child);
    }
    const largeDir = mkdtempSync(join(work, 'data-'));
    const input = join(work, 'large.jsonl');
    const total = options.batches * options.lines;
    await writeBatchInput(input, chatRequests('large', total));
    const large = await spoolBatchOnEmbedded(largeDir, env, input, total, options.build);
    const largeSeconds = large.phases.validate + large.phases.run + large.phases.finalize;
    return { small, largeLinesPerSecond: total / largeSeconds, ratio: small.linesPerSecond / (total / largeSeconds) };
  } finally {
    await upstream.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

/** Item 12: `batches` batches of `lines` lines created at once, beside one batch of all their lines. */
export async function benchSmallBatches(options: { batches: number; lines: number; rounds: number; previous?: string }): Promise<SmallBatchesResult> {
  const thisBuild: SmallBatchesRound[] = [];
  const previousBuild: SmallBatchesRound[] = [];
  for (let round = 0; round < options.rounds; round++) {
    // Alternating builds, so a machine that slows down mid-run slows both, and which goes first
    // with them: the second of a pair runs while the kernel writes back what the first wrote.
    for (const build of options.previous ? (round % 2 === 0 ? [undefined, options.previous] : [options.previous, undefined]) : [undefined]) {
      const run = await smallBatchesRound({ batches: options.batches, lines: options.lines, ...(build ? { build } : {}) });
      (build ? previousBuild : thisBuild).push(run);
      process.stdout.write(
        `small batches (${build ? 'previous' : 'this'} build): ${options.batches} × ${options.lines} lines in ${run.small.seconds.toFixed(1)} s, ${run.small.batchesPerSecond.toFixed(1)} batches/s, ${run.small.linesPerSecond.toFixed(0)} lines/s vs one batch ${run.largeLinesPerSecond.toFixed(0)} lines/s (${(run.ratio * 100).toFixed(0)}%), created→ended median ${run.small.createdToEnded.toFixed(1)} s, CPU ${run.small.cpuMsPerThousandLines.toFixed(0)} ms per 1,000 lines (${Object.entries(run.small.cpuByThread ?? {}).map(([kind, ms]) => `${kind} ${ms.toFixed(0)}`).join(', ')})\n`,
      );
    }
  }
  return { batches: options.batches, lines: options.lines, rounds: options.rounds, thisBuild, ...(options.previous ? { previousBuild } : {}) };
}

export interface HistoryRun {
  /** One entry per wave, in order. */
  waves: WaveRun[];
  /** Lines/s of the first and the last tenth of the waves (medians), and last / first. */
  firstTenthLinesPerSecond: number;
  lastTenthLinesPerSecond: number;
  ratio: number;
  peakRssMiB: number;
  firstTenthRssMiB: number;
  lastTenthRssMiB: number;
  /** CPU per 1,000 lines and KiB written per line, the first tenth's and the last tenth's (medians): what a busy machine blurs less. */
  firstTenthCpuMsPerThousandLines?: number;
  lastTenthCpuMsPerThousandLines?: number;
  firstTenthWrittenKiBPerLine?: number;
  lastTenthWrittenKiBPerLine?: number;
}

export interface HistoryResult {
  waves: number;
  batchesPerWave: number;
  lines: number;
  /** Whether the builds' services ran side by side, fed a wave each in turn (since 2026-11-30; before, one build's waves after the other's). */
  alternated?: boolean;
  thisBuild: HistoryRun;
  previousBuild?: HistoryRun;
}

/** The first and last tenth of a service's waves, summed up. */
function historyOf(waves: WaveRun[], peakRss: number): HistoryRun {
  const tenth = Math.max(1, Math.round(waves.length / 10));
  const first = waves.slice(0, tenth);
  const last = waves.slice(-tenth);
  /** A figure's median over the first tenth and over the last. */
  const tenths = (figure: (run: WaveRun) => number): [number, number] => [median(first.map(figure)), median(last.map(figure))];
  const [firstRate, lastRate] = tenths((run) => run.linesPerSecond);
  const [firstRss, lastRss] = tenths((run) => run.rssMiB);
  const [firstCpu, lastCpu] = tenths((run) => run.cpuMsPerThousandLines);
  const [firstWritten, lastWritten] = tenths((run) => run.writtenKiBPerLine);
  return {
    waves,
    firstTenthLinesPerSecond: firstRate,
    lastTenthLinesPerSecond: lastRate,
    ratio: lastRate / firstRate,
    peakRssMiB: peakRss,
    firstTenthRssMiB: firstRss,
    lastTenthRssMiB: lastRss,
    firstTenthCpuMsPerThousandLines: firstCpu,
    lastTenthCpuMsPerThousandLines: lastCpu,
    firstTenthWrittenKiBPerLine: firstWritten,
    lastTenthWrittenKiBPerLine: lastWritten,
  };
}

/**
 * Item 13: waves of batches through one service, the same work each wave, and its speed as it
 * ages. With a previous build, both builds' services run side by side from the start and take a
 * wave each in turn, first one then the other, so a machine that slows for some minutes slows
 * both (one build's fifty waves after the other's measured the minutes each ran in as much as the
 * build).
 */
export async function benchHistory(options: { waves: number; batches: number; lines: number; previous?: string }): Promise<HistoryResult> {
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-history-'));
  const upstream = await startUpstream(0, CONCURRENCY);
  const builds = options.previous ? [undefined, options.previous] : [undefined];
  const services: Array<{ build: string | undefined; spool: Awaited<ReturnType<typeof startSpool>>; dataDir: string; waves: WaveRun[]; peak: number }> = [];
  try {
    const env = benchJobEnv(work, upstream.url, CONCURRENCY);
    for (const build of builds) {
      const dataDir = mkdtempSync(join(work, 'data-'));
      services.push({ build, spool: await startSpool(dataDir, env, build), dataDir, waves: [], peak: 0 });
    }
    for (let index = 0; index < options.waves; index++) {
      // This, previous, previous, this, …: neither build always follows the other (the one that
      // goes second meets whatever the first left the machine doing: its disk's write-back, say).
      for (const service of index % 2 === 0 ? services : [...services].reverse()) {
        const run = await wave({ url: service.spool.url, pid: service.spool.child.pid!, dataDir: service.dataDir }, `w${index}`, options.batches, options.lines);
        service.waves.push(run);
        if (index % 5 === 0 || index === options.waves - 1) {
          process.stdout.write(`history (${service.build ? 'previous' : 'this'} build) wave ${index + 1}/${options.waves}: ${run.linesPerSecond.toFixed(0)} lines/s, ${run.batchesPerSecond.toFixed(1)} batches/s, ${run.cpuMsPerThousandLines.toFixed(0)} ms CPU per 1,000 lines, ${run.writtenKiBPerLine.toFixed(1)} KiB written per line, rss ${run.rssMiB.toFixed(0)} MiB\n`);
        }
      }
    }
  } finally {
    for (const service of services) {
      service.peak = peakRssMiB(service.spool.child.pid!);
      await stop(service.spool.child);
    }
    await upstream.stop();
    rmSync(work, { recursive: true, force: true });
  }
  const [ours, previous] = services.map((service) => historyOf(service.waves, service.peak));
  return { waves: options.waves, batchesPerWave: options.batches, lines: options.lines, alternated: builds.length > 1, thisBuild: ours!, ...(previous ? { previousBuild: previous } : {}) };
}
