import type { Logger } from 'pino';
import { servedByInOutput } from '../../src/domain/batch-output.js';
import type { BatchLifecycle } from '../../src/application/batch-lifecycle.js';
import type { LineOutcomeLog } from '../../src/application/line-outcomes.js';
import type { BlobStore } from '../../src/blob-store/blob-store.js';
import { BlobNotFoundError } from '../../src/blob-store/blob-store.js';
import type { Clock } from '../../src/platform/clock.js';
import { isBlank } from '../../src/domain/batch-input.js';
import { runsLines } from '../../src/domain/batch.js';
import type { EngineDirectory } from '../../src/engine/engine.js';
import type { BatchRow, BatchesQueries, ChunkRow } from '../../projections/batches-projection.js';
import { BatchLineSender } from './batch-line-sender.js';
import { ChunkAdmission } from './chunk-admission.js';
import { ChunkOutcomeRecording, type RenderedParts } from './chunk-outcome-recorder.js';
import type { ChunkOutputParts } from './chunk-output-parts.js';
import type { RenderedChunkHandoff } from './rendered-chunk-handoff.js';
import { NO_TRACING, type TraceSpan, type Tracing } from '../../src/observability/tracing.js';
import { PhysicalLineSplitter } from './jsonl-lines.js';
import { WaitingLines } from './waiting-lines.js';
import { parseWorkRecord } from '../../src/domain/work-file.js';

const CORRELATION = 'batch-runner';

/**
 * Lines of one chunk waiting for an engine slot at once; the next is read as one is admitted. A
 * chunk's lines all have one deadline and job, so these are enough for the engine's scheduler to
 * put the most urgent chunk's lines first and share slots between jobs, while a process running
 * 8 chunks holds about 250 waiting lines (parsed, with their promises and spans), not 1,600.
 * Fewer live shorter (8 promoted a quarter less to the old generation on the embedded default),
 * but on the Kafka shape over PostgreSQL, where a chunk takes longer to end and the next to begin,
 * 8 left the engine 10-20 requests short of its 128 (bench/FINDINGS.md, 2026-11-29).
 */
const WAITING_LINES_PER_CHUNK = 32;

const chunkKey = (chunk: Pick<ChunkRow, 'batch_id' | 'chunk'>) => `${chunk.batch_id}#${chunk.chunk}`;

/** What a chunk's run did: whether it had lines to record outcomes for, and its parts where it rendered them. */
interface ChunkRun {
  readonly recorded: boolean;
  readonly rendered?: RenderedParts;
}
const NOTHING_RECORDED: ChunkRun = { recorded: false };

/**
 * A chunk left unfinished because the process is stopping: the lines sent have their outcomes,
 * the others none, and the work message is not acknowledged, so the next start (or another
 * processor) runs what is left.
 */
export class ChunkInterruptedError extends Error {
  override readonly name = 'ChunkInterruptedError';
}

/**
 * Runs chunks of batch lines through the engines: starts the chunks ChunkAdmission lets run, reads
 * each one's lines that have no outcome yet, keeps a few of them waiting for an engine slot, and
 * has their outcomes recorded. Each line is checked against the batch's state just before it is
 * sent (BatchLineSender): once a batch is cancelling or expiring no new line goes out, lines in
 * flight finish, and the lines left are recorded as batch_cancelled or batch_expired.
 */
export class BatchRunner {
  private readonly running = new Map<string, Promise<void>>();
  private readonly admission: ChunkAdmission;
  private readonly outcomes: ChunkOutcomeRecording;
  private readonly lines: BatchLineSender;
  private stopping = false;

  constructor(
    private readonly deps: {
      blobStore: BlobStore;
      batches: BatchLifecycle;
      queries: BatchesQueries;
      outcomes: LineOutcomeLog;
      engines: EngineDirectory;
      clock: Clock;
      log: Pick<Logger, 'info' | 'warn' | 'error'>;
      /** Chunks run at once (BATCH_PARALLEL_CHUNKS); more are held, and started by deadline. */
      parallelChunks: number;
      tracing?: Tracing;
      /** Renders each finished chunk's output lines for the finalizer. */
      parts?: Pick<ChunkOutputParts, 'tryWrite'>;
      /** The finalizer of this process, where it has one: a batch's only chunk is rendered for it in memory. */
      renderedChunks?: Pick<RenderedChunkHandoff, 'offer'>;
    },
  ) {
    this.admission = new ChunkAdmission({ parallel: deps.parallelChunks });
    this.outcomes = new ChunkOutcomeRecording(deps.outcomes, CORRELATION);
    this.lines = new BatchLineSender({ queries: deps.queries, log: deps.log, tracing: deps.tracing, processStopping: () => this.stopping });
  }

  /**
   * Runs the lines of one chunk that have no outcome yet; resolves once each has one. A chunk
   * already running here is not started twice: the call waits for that run instead.
   */
  async run(batchId: string, chunkIndex: number): Promise<void> {
    if (this.stopping) throw new ChunkInterruptedError(`chunk ${chunkIndex} of ${batchId} not started: stopping`);
    const chunks = this.deps.queries.chunks(batchId);
    const chunk = chunks.find((row) => row.chunk === chunkIndex);
    if (!chunk) return;
    const key = chunkKey(chunk);
    const running = this.running.get(key);
    if (running) return running;
    const run = this.whenAdmitted(chunk, chunks.length).finally(() => this.running.delete(key));
    this.running.set(key, run);
    return run;
  }

  /** Runs the chunk once ChunkAdmission lets it start: held chunks start by deadline, not arrival. */
  private async whenAdmitted(chunk: ChunkRow, chunksOfBatch: number): Promise<void> {
    const batch = this.deps.queries.get(chunk.batch_id);
    if (!batch) return;
    // Chunks are shared between accounts (where there are accounts), else between jobs; the engines' scheduler shares slots between an account's jobs.
    const release = await this.admission.admit({ ...(batch.expires_at !== null ? { deadline: batch.expires_at * 1000 } : {}), fairnessKey: batch.account_id !== null ? `account ${batch.account_id}` : batch.job_id });
    // Parts (below) are rendered as the outcomes are recorded, where they will be written or handed over.
    const renderParts = !batch.work_blob_key && (chunksOfBatch >= 2 ? this.deps.parts !== undefined : this.deps.renderedChunks !== undefined);
    let run: ChunkRun;
    try {
      // Its place is given up once its lines are answered (release is called again here, to no effect).
      run = await this.runChunk(chunk, renderParts, release);
    } finally {
      release();
    }
    // Its slot is free for the next chunk meanwhile. Not once the batch is finalizing: the finalizer
    // renders what it finds no part for, and would leave a part written after it to the sweeper. A
    // work file's chunks are put back in input order by the finalizer. Not by a run that found every
    // line settled (a redelivered chunk): the run that recorded them wrote the parts, and writing
    // them again could meet the finalizer reading them. Nor for a batch of one chunk: the finalizer
    // renders it from the outcomes at once, where its parts cost two files written, listed and
    // removed (many small batches at once spent much of their time so); what the run rendered is
    // handed to this process's finalizer instead, where it has one, while the batch still runs
    // (one that is finalizing already rendered it from the outcomes).
    const handOver = chunksOfBatch < 2 ? this.deps.renderedChunks : undefined;
    if (this.stopping || (chunksOfBatch < 2 && !(run.rendered && handOver))) return;
    const now = this.deps.queries.get(chunk.batch_id);
    if (!now || !runsLines(now.status)) return;
    if (handOver) handOver.offer(chunk.batch_id, chunk.chunk, run.rendered!);
    else if (run.recorded && !now.work_blob_key) await this.deps.parts?.tryWrite({ ...chunk, account_id: now.account_id, served_by: servedByInOutput(now.metadata) }, run.rendered);
  }

  /** Chunks running now (for a stop that says what it waits for). */
  get runningChunks(): number {
    return this.admission.counts.running;
  }

  /**
   * Sends no new line from now on: a stop waits only for the requests already with an engine,
   * not for whole chunks (a chunk of slow requests takes minutes).
   */
  stop(): void {
    this.stopping = true;
    this.admission.dropHeld(new ChunkInterruptedError('not started: stopping'));
  }

  /** Resolves when no chunk is running (shutdown). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()]);
  }

  /** `linesDone`: called once the chunk has no line left to send or in flight, before its last outcomes are recorded. */
  private async runChunk(chunk: ChunkRow, renderParts: boolean, linesDone: () => void): Promise<ChunkRun> {
    const span = (this.deps.tracing ?? NO_TRACING).startBatchSpan(chunk.batch_id, 'run chunk', {
      attributes: { 'spool.batch.id': chunk.batch_id, 'spool.batch.chunk': chunk.chunk, 'spool.batch.chunk.lines': chunk.lines },
    });
    try {
      return await this.runChunkLines(chunk, span, renderParts, linesDone);
    } catch (error) {
      span.fail(error instanceof Error ? error.message : String(error));
      throw error;
    } finally {
      span.end();
    }
  }

  private async runChunkLines(chunk: ChunkRow, chunkSpan: TraceSpan, renderParts: boolean, linesDone: () => void): Promise<ChunkRun> {
    const batch = this.deps.queries.get(chunk.batch_id);
    if (!batch || !batch.input_blob_key || !runsLines(batch.status)) return NOTHING_RECORDED;
    const recorder = await this.outcomes.begin(chunk, { renderParts, servedBy: servedByInOutput(batch.metadata) });
    if (recorder.complete) return NOTHING_RECORDED;

    const engine = this.deps.engines.engineFor(batch.model);
    if (!engine) {
      await this.failBatch(batch, 'model_not_available', `No engine serves model ${JSON.stringify(batch.model)}`);
      return NOTHING_RECORDED;
    }
    let source;
    try {
      source = await this.deps.blobStore.get(batch.work_blob_key ?? batch.input_blob_key, { start: chunk.start, end: chunk.end - 1 });
    } catch (error) {
      if (!(error instanceof BlobNotFoundError)) throw error;
      await this.failBatch(batch, 'input_file_not_found', `Input file ${batch.input_file_id} was deleted while the batch ran`);
      return NOTHING_RECORDED;
    }

    // A line that fails outright (not an engine's failure: those are outcomes) fails the chunk
    // once the lines already sent are over; it is held there meanwhile (waiting.failure).
    const waiting = new WaitingLines(WAITING_LINES_PER_CHUNK, (outcome) => recorder.add(outcome));
    // The chunk's lines taken one at a time from the bytes read (not an async iterator's promise a line).
    const fromWorkFile = Boolean(batch.work_blob_key);
    const lines = fromWorkFile ? new PhysicalLineSplitter() : new PhysicalLineSplitter(chunk.first_line, chunk.start);
    const chunks = (source as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    let read = false;
    try {
      for (;;) {
        let physical = lines.next();
        if (!physical) {
          if (read) break;
          const next = await chunks.next();
          if (!next.done) {
            lines.push(next.value);
            continue;
          }
          read = true;
          physical = lines.finish();
          if (!physical) break;
        }
        if (this.stopping || waiting.failure) break;
        if (isBlank(physical.text)) continue;
        // A work file's record names its input line.
        const line = fromWorkFile ? parseWorkRecord(physical.text) : physical;
        if ((fromWorkFile && isBlank(line.text)) || !recorder.awaits(line.number)) continue;
        const room = waiting.room();
        if (room) await room;
        if (this.stopping || waiting.failure) break;
        this.lines.send(batch, engine, line.number, line.text, chunkSpan, waiting.enter());
      }
      await waiting.allSettled();
      // The engines are done with the chunk: the next may start while its last group is recorded
      // (an append answered once the log's commit is flushed to disk). Held until then, a chunk of
      // a small batch spent much of its place waiting on that flush, with nothing to send.
      linesDone();
      if (waiting.failure) throw waiting.failure.error;
    } finally {
      source.destroy();
      await recorder.close();
    }
    if (this.stopping) throw new ChunkInterruptedError(`chunk ${chunk.chunk} of ${chunk.batch_id} left unfinished (${waiting.leftOver} lines withdrawn, the rest not read): stopping`);
    if (!recorder.recorded) return NOTHING_RECORDED;
    const rendered = recorder.renderedParts();
    return rendered ? { recorded: true, rendered } : { recorded: true };
  }

  private async failBatch(batch: BatchRow, code: string, message: string): Promise<void> {
    await this.deps.batches.run(batch.id, { type: 'FailBatch', at: this.deps.clock.nowSeconds(), errors: [{ code, line: null, message, param: null }] }, { correlationId: CORRELATION });
  }
}
