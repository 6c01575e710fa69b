import type { Logger } from 'pino';
import type { BatchLifecycle } from '../../src/application/batch-lifecycle.js';
import type { LineOutcomeLog } from '../../src/application/line-outcomes.js';
import { type LineOutcome, ZERO_USAGE } from '../../src/domain/line-outcome.js';
import type { BlobStore } from '../../src/blob-store/blob-store.js';
import { BlobNotFoundError } from '../../src/blob-store/blob-store.js';
import type { Clock } from '../../src/platform/clock.js';
import { isBlank } from '../../src/domain/batch-input.js';
import { runsLines, stoppingCode } from '../../src/domain/batch.js';
import { type EngineDirectory, type EngineRequest, EngineUnavailableError, type InferenceEngine, RequestWithdrawnError, usageOf } from '../../src/engine/engine.js';
import { ImageFetchError } from '../../src/engine/images/image-resolver.js';
import type { BatchRow, BatchesQueries, ChunkRow } from '../../projections/batches-projection.js';
import { ChunkAdmission } from './chunk-admission.js';
import type { ChunkOutputParts } from './chunk-output-parts.js';
import { NO_TRACING, type TraceSpan, type Tracing, genAiOperation } from '../../src/observability/tracing.js';
import { physicalLines } from './jsonl-lines.js';
import { parseWorkRecord } from '../../src/domain/work-file.js';

const CORRELATION = 'batch-runner';
/** Outcomes are recorded in groups: one durable append per group, not per line. */
const FLUSH_LINES = 256;
const FLUSH_MS = 200;

/**
 * Lines of one chunk waiting for an engine slot at once; the next is read as one is admitted. A
 * chunk's lines all have one deadline and job, so these are enough for the engine's scheduler to
 * put the most urgent chunk's lines first and share slots between jobs, while a process running
 * 8 chunks holds about 250 waiting lines (parsed, with their promises and spans), not 1,600.
 */
const WAITING_LINES_PER_CHUNK = 32;

const chunkKey = (chunk: Pick<ChunkRow, 'batch_id' | 'chunk'>) => `${chunk.batch_id}#${chunk.chunk}`;

/**
 * A chunk left unfinished because the process is stopping: the lines sent have their outcomes,
 * the others none, and the work message is not acknowledged, so the next start (or another
 * processor) runs what is left.
 */
export class ChunkInterruptedError extends Error {
  override readonly name = 'ChunkInterruptedError';
}

/**
 * Runs chunks of batch lines through the engines. Each line is checked against the batch's state
 * just before it is sent: once a batch is cancelling or expiring no new line goes out, lines in
 * flight finish, and the lines left are recorded as batch_cancelled or batch_expired.
 */
export class BatchRunner {
  private readonly running = new Map<string, Promise<void>>();
  private readonly admission: ChunkAdmission;
  private readonly flushes = new FlushClock();
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
      parallelChunks?: number;
      tracing?: Tracing;
      /** Renders each finished chunk's output lines for the finalizer. */
      parts?: Pick<ChunkOutputParts, 'tryWrite'>;
    },
  ) {
    this.admission = new ChunkAdmission({ parallel: deps.parallelChunks ?? 8 });
  }

  /**
   * Runs the lines of one chunk that have no outcome yet; resolves once each has one. A chunk
   * already running here is not started twice: the call waits for that run instead.
   */
  async run(batchId: string, chunkIndex: number): Promise<void> {
    if (this.stopping) throw new ChunkInterruptedError(`chunk ${chunkIndex} of ${batchId} not started: stopping`);
    const chunk = this.deps.queries.chunks(batchId).find((row) => row.chunk === chunkIndex);
    if (!chunk) return;
    const key = chunkKey(chunk);
    const running = this.running.get(key);
    if (running) return running;
    const run = this.whenAdmitted(chunk).finally(() => this.running.delete(key));
    this.running.set(key, run);
    return run;
  }

  /** Runs the chunk once ChunkAdmission lets it start: held chunks start by deadline, not arrival. */
  private async whenAdmitted(chunk: ChunkRow): Promise<void> {
    const batch = this.deps.queries.get(chunk.batch_id);
    if (!batch) return;
    const release = await this.admission.admit({ ...(batch.expires_at !== null ? { deadline: batch.expires_at * 1000 } : {}), fairnessKey: batch.job_id });
    let recorded: boolean;
    try {
      recorded = await this.runChunk(chunk);
    } finally {
      release();
    }
    // Its slot is free for the next chunk meanwhile. Not once the batch is finalizing: the finalizer
    // renders what it finds no part for, and would leave a part written after it to the sweeper. A
    // work file's chunks are put back in input order by the finalizer. Not by a run that found every
    // line settled (a redelivered chunk): the run that recorded them wrote the parts, and writing
    // them again could meet the finalizer reading them.
    const now = this.deps.queries.get(chunk.batch_id);
    if (recorded && now && !now.work_blob_key && runsLines(now.status) && !this.stopping) await this.deps.parts?.tryWrite(chunk);
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

  /** Whether the run had lines to record outcomes for. */
  private async runChunk(chunk: ChunkRow): Promise<boolean> {
    const span = (this.deps.tracing ?? NO_TRACING).startBatchSpan(chunk.batch_id, 'run chunk', {
      attributes: { 'spool.batch.id': chunk.batch_id, 'spool.batch.chunk': chunk.chunk, 'spool.batch.chunk.lines': chunk.lines },
    });
    try {
      return await this.runChunkLines(chunk, span);
    } catch (error) {
      span.fail(error instanceof Error ? error.message : String(error));
      throw error;
    } finally {
      span.end();
    }
  }

  private async runChunkLines(chunk: ChunkRow, chunkSpan: TraceSpan): Promise<boolean> {
    const batch = this.deps.queries.get(chunk.batch_id);
    if (!batch || !batch.input_blob_key || !runsLines(batch.status)) return false;
    const settled = await this.deps.outcomes.settledLines(chunk.batch_id, chunk.chunk);
    if (settled.size >= chunk.lines) return false;

    const engine = this.deps.engines.engineFor(batch.model);
    if (!engine) {
      await this.failBatch(batch, 'model_not_available', `No engine serves model ${JSON.stringify(batch.model)}`);
      return false;
    }
    let source;
    try {
      source = await this.deps.blobStore.get(batch.work_blob_key ?? batch.input_blob_key, { start: chunk.start, end: chunk.end - 1 });
    } catch (error) {
      if (!(error instanceof BlobNotFoundError)) throw error;
      await this.failBatch(batch, 'input_file_not_found', `Input file ${batch.input_file_id} was deleted while the batch ran`);
      return false;
    }

    const recorder = new OutcomeRecorder(this.deps.outcomes, chunk, this.flushes);
    const waiting = new WaitingLines(WAITING_LINES_PER_CHUNK);
    const work: Promise<void>[] = [];
    let leftOver = 0;
    let recorded = false;
    // A line that fails outright (not an engine's failure: those are outcomes) fails the chunk
    // once the lines already sent are over; it is held here meanwhile, not left unobserved.
    let failure: { error: unknown } | undefined;
    try {
      for await (const line of batch.work_blob_key ? workFileLines(source) : physicalLines(source, chunk.first_line, chunk.start)) {
        if (this.stopping || failure) break;
        if (isBlank(line.text) || settled.has(line.number)) continue;
        await waiting.room();
        if (this.stopping || failure) break;
        const leftQueue = waiting.enter();
        work.push(
          this.runLine(batch, engine, line.number, line.text, chunkSpan, leftQueue)
            .then(
              (outcome) => {
                if (outcome) {
                  recorder.add(outcome);
                  recorded = true;
                }
                else leftOver++;
              },
              (error: unknown) => {
                failure ??= { error };
              },
            )
            .finally(leftQueue),
        );
      }
      await Promise.all(work);
      if (failure) throw failure.error;
    } finally {
      source.destroy();
      await recorder.close();
    }
    if (this.stopping) throw new ChunkInterruptedError(`chunk ${chunk.chunk} of ${chunk.batch_id} left unfinished (${leftOver} lines withdrawn, the rest not read): stopping`);
    return recorded;
  }

  /** The line's outcome; undefined when the process stopped before the line was sent. */
  /** `admitted`: called once the engine gives the line a slot (or never, if it is not sent). */
  private async runLine(batch: BatchRow, engine: InferenceEngine, line: number, text: string, chunkSpan: TraceSpan, admitted: () => void): Promise<LineOutcome | undefined> {
    const request = JSON.parse(text) as { custom_id: string; body: Record<string, unknown> };
    if (this.stopping) return undefined;
    const model = typeof request.body.model === 'string' ? request.body.model : batch.model;
    const operation = genAiOperation(batch.endpoint);
    // The GenAI semantic conventions' client span: one per line sent to an engine.
    const span = (this.deps.tracing ?? NO_TRACING).startBatchSpan(batch.id, `${operation} ${model}`, {
      parent: chunkSpan,
      kind: 'client',
      attributes: { 'gen_ai.operation.name': operation, 'gen_ai.request.model': model, 'spool.batch.id': batch.id, 'spool.batch.line': line, 'spool.batch.custom_id': request.custom_id },
    });
    try {
      const outcome = await this.sendLine(batch, engine, line, request, span.traceparent, admitted);
      if (outcome) span.setAttributes(outcomeAttributes(outcome));
      if (outcome?.type === 'LineFailed') span.fail(outcome.data.error?.code ?? `status ${outcome.data.status_code}`);
      return outcome;
    } finally {
      span.end();
    }
  }

  private async sendLine(
    batch: BatchRow,
    engine: InferenceEngine,
    line: number,
    request: { custom_id: string; body: Record<string, unknown> },
    traceparent: string | undefined,
    admitted: () => void,
  ): Promise<LineOutcome | undefined> {
    const base = { batch_id: batch.id, line, custom_id: request.custom_id };
    const stopped = () => {
      const stopping = this.deps.queries.stopping(batch.id);
      return stopping ? failed(base, stoppingCode(stopping), `The batch was ${stopping} before this request was sent`) : undefined;
    };
    if (this.stopping) return undefined;
    const before = stopped();
    if (before) return before;
    try {
      const response = await engine.infer({
        endpoint: batch.endpoint,
        body: { ...request.body, model: request.body.model ?? batch.model },
        // The engine's concurrency limit may keep a line waiting: look at the batch (and whether
        // this process is stopping) again once admitted.
        withdraw: () => {
          admitted();
          return this.stopping || Boolean(stopped());
        },
        ...lineUrgency(batch),
        ...(traceparent ? { traceparent } : {}),
      });
      const usage = usageOf(response.body);
      if (response.statusCode < 400) {
        return { type: 'LineCompleted', data: { ...base, request_id: response.requestId, status_code: response.statusCode, body: response.body, usage } };
      }
      return { type: 'LineFailed', data: { ...base, request_id: response.requestId, status_code: response.statusCode, body: response.body, error: null, usage } };
    } catch (error) {
      if (error instanceof RequestWithdrawnError && this.stopping) return undefined;
      if (error instanceof RequestWithdrawnError) return stopped() ?? failed(base, 'batch_cancelled', 'The batch stopped before this request was sent');
      // Error files are readable by anyone who knows the batch: their messages name no replica,
      // address or connection error. The detail goes to the log.
      if (error instanceof ImageFetchError) return failed(base, 'image_fetch_failed', error.message);
      if (error instanceof EngineUnavailableError) {
        this.deps.log.warn({ batch_id: batch.id, line, reason: error.detail }, 'no engine answered a batch line');
        return failed(base, 'engine_unavailable', error.message);
      }
      this.deps.log.error({ batch_id: batch.id, line, err: error }, 'a batch line could not be sent');
      return failed(base, 'engine_unavailable', 'The request could not be sent to an engine');
    }
  }

  private async failBatch(batch: BatchRow, code: string, message: string): Promise<void> {
    await this.deps.batches.run(batch.id, { type: 'FailBatch', at: this.deps.clock.nowSeconds(), errors: [{ code, line: null, message, param: null }] }, { correlationId: CORRELATION });
  }
}

/** A chunk of a work file: each record names its input line. */
async function* workFileLines(source: AsyncIterable<Buffer>): AsyncGenerator<{ number: number; text: string }> {
  for await (const record of physicalLines(source)) if (!isBlank(record.text)) yield parseWorkRecord(record.text);
}

/**
 * How the fleet schedules a line: by its batch's deadline, shared fairly between jobs; a batch
 * with no deadline (its job's SLA is none) runs on capacity nobody else wants.
 */
function lineUrgency(batch: BatchRow): Pick<EngineRequest, 'serviceClass' | 'deadline' | 'fairnessKey'> {
  return batch.expires_at === null
    ? { serviceClass: 'background', fairnessKey: batch.job_id }
    : { serviceClass: 'batch', deadline: batch.expires_at * 1000, fairnessKey: batch.job_id };
}

/** What an engine call's span shows of its answer, by the GenAI semantic conventions. */
function outcomeAttributes(outcome: LineOutcome): Record<string, string | number> {
  const { data } = outcome;
  const body = data.body as { id?: unknown; model?: unknown } | null;
  return {
    'gen_ai.usage.input_tokens': data.usage.prompt_tokens,
    'gen_ai.usage.output_tokens': data.usage.completion_tokens,
    ...(typeof body?.id === 'string' ? { 'gen_ai.response.id': body.id } : {}),
    ...(typeof body?.model === 'string' ? { 'gen_ai.response.model': body.model } : {}),
    ...(data.status_code !== null ? { 'http.response.status_code': data.status_code } : {}),
    ...(data.request_id !== null ? { 'spool.engine.request_id': data.request_id } : {}),
  };
}

function failed(base: { batch_id: string; line: number; custom_id: string }, code: string, message: string): LineOutcome {
  return { type: 'LineFailed', data: { ...base, request_id: null, status_code: null, body: null, error: { code, message }, usage: ZERO_USAGE } };
}

/** Counts a chunk's lines sent to the engine and not yet admitted; room() waits while there are `limit`. */
class WaitingLines {
  private count = 0;
  private wake: (() => void) | undefined;

  constructor(private readonly limit: number) {}

  async room(): Promise<void> {
    while (this.count >= this.limit) await new Promise<void>((resolve) => (this.wake = resolve));
  }

  /** A line goes to the engine; the returned function says it left the queue (admitted, or finished without a slot), once. */
  enter(): () => void {
    this.count++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.count--;
      const wake = this.wake;
      this.wake = undefined;
      wake?.();
    };
  }
}

/**
 * One timer for the outcome groups of every chunk a runner holds: their flushes fall in one turn
 * of the event loop, where the embedded log commits their appends together (one fsync for all).
 * With a timer per chunk, 8 chunks made 8 commits where one does. A group still waits at most
 * FLUSH_MS.
 */
class FlushClock {
  private readonly due = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;

  schedule(flush: () => void): void {
    this.due.add(flush);
    this.timer ??= setTimeout(() => this.tick(), FLUSH_MS);
  }

  cancel(flush: () => void): void {
    this.due.delete(flush);
  }

  private tick(): void {
    this.timer = undefined;
    const due = [...this.due];
    this.due.clear();
    for (const flush of due) flush();
  }
}

/** Collects a chunk's outcomes and records them in groups, one append at a time. */
class OutcomeRecorder {
  private pending: LineOutcome[] = [];
  private writing: Promise<unknown> = Promise.resolve();
  private failure: unknown;
  private readonly flushNow = () => this.flush();

  constructor(private readonly log: LineOutcomeLog, private readonly chunk: ChunkRow, private readonly clock: FlushClock) {}

  add(outcome: LineOutcome): void {
    this.pending.push(outcome);
    if (this.pending.length >= FLUSH_LINES) this.flush();
    else this.clock.schedule(this.flushNow);
  }

  private flush(): void {
    this.clock.cancel(this.flushNow);
    if (this.pending.length === 0) return;
    const group = this.pending;
    this.pending = [];
    this.writing = this.writing
      .then(() => this.log.record(this.chunk.batch_id, this.chunk.chunk, group, CORRELATION))
      .catch((error: unknown) => {
        this.failure ??= error;
      });
  }

  async close(): Promise<void> {
    this.flush();
    await this.writing;
    this.log.forget(this.chunk.batch_id, this.chunk.chunk);
    if (this.failure) throw this.failure;
  }
}
