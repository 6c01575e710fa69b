import type { AccountLimits } from '../../src/domain/account.js';
import { type AccountUsage, estimatedTokens, queuedWorkRefusal } from '../../src/domain/account-quota.js';
import type { Logger } from 'pino';
import type { BatchLifecycle } from '../../src/application/batch-lifecycle.js';
import { loadState } from '../../src/application/command-handler.js';
import type { BlobStore } from '../../src/blob-store/blob-store.js';
import { BlobNotFoundError } from '../../src/blob-store/blob-store.js';
import type { Clock } from '../../src/platform/clock.js';
import {
  MAX_EMBEDDING_INPUTS_PER_BATCH,
  MAX_LISTED_ERRORS,
  MAX_REQUESTS_PER_BATCH,
  checkInputLine,
  isBlank,
} from '../../src/domain/batch-input.js';
import { type BatchError, type BatchFacts, type ChunkSpec, awaitsValidation } from '../../src/domain/batch.js';
import { DEFAULT_UPLOAD_LIMITS, fileDecider } from '../../src/domain/file.js';
import { fileStreamName } from '../../src/domain/stream-names.js';
import type { EngineDirectory } from '../../src/engine/engine.js';
import type { EventStore } from '../../src/event-store/event-store.js';
import { NO_TRACING, type Tracing } from '../../src/observability/tracing.js';
import { RunsByKey } from '../../src/platform/runs-by-key.js';
import { PrefixSignatureTable, prefixSignature } from '../../src/domain/prefix-order.js';
import { type PhysicalLine, PhysicalLineSplitter } from './jsonl-lines.js';
import { RequestLines, WorkFileWriter } from './work-file-writer.js';
import type { BatchesQueries } from '../../projections/batches-projection.js';


const CORRELATION = { correlationId: 'batch-validator' };

/**
 * Validates a batch's input file, as OpenAI does, after the batch was created: streams the file
 * once, checks every line and the file-wide limits, and splits the requests into chunks of work.
 */
export class BatchValidator {
  constructor(
    private readonly deps: {
      eventStore: EventStore;
      blobStore: BlobStore;
      batches: BatchLifecycle;
      /** The batches read model, which holds at least the event behind the message being handled. */
      queries: Pick<BatchesQueries, 'get'>;
      engines: EngineDirectory;
      clock: Clock;
      log: Pick<Logger, 'info' | 'warn'>;
      chunkLines: number;
      /**
       * Inference processors share a batch by the partitions of its chunks (one after another, round
       * robin): with spreadOver > 1 a batch is cut into a multiple of spreadOver chunks of sizes
       * differing by one at most (as many as chunkLines would give, rounded up; one a line at most),
       * so that every partition, and so every processor holding as many partitions as another, holds
       * the same share of it. Cut every chunkLines lines instead, 250 chunks over 16 partitions left
       * one of two processors 6 chunks more, which it ran alone at the end. Default 1.
       */
      spreadOver?: number;
      maxInputBytes?: number;
      tracing?: Tracing;
      /** auto: lines sharing a prompt prefix are laid out to run together (a work file); off: file order. */
      prefixOrder?: 'auto' | 'off';
      /** Where the work file is assembled before it is stored (local disk). */
      scratchDir?: string;
      /** The account's limits and what it has queued (ACCOUNTS=required): a batch over them fails validation. */
      quotas?: { limitsOf(accountId: string): AccountLimits | undefined; queuedWorkOf(accountId: string, excludingBatch?: string): Pick<AccountUsage, 'queued_lines' | 'queued_tokens'> };
    },
  ) {}

  /**
   * Validates the batch if its validation may still land. A batch the read models show past that
   * is left alone without reading its stream (the embedded relay republishes the whole log at every
   * start); the stream's state has the last word.
   */
  validate(batchId: string): Promise<void> {
    // Several validation messages of one batch may be handled at once (messages of a partition
    // run together): one validation at a time per batch, the later ones after it.
    return this.runs.run(batchId, () => this.validateOnce(batchId));
  }

  private readonly runs = new RunsByKey();

  private async validateOnce(batchId: string): Promise<void> {
    const shown = this.deps.queries.get(batchId);
    if (!shown || !awaitsValidation(shown)) return;
    const state = await this.deps.batches.state(batchId);
    if (state.status === 'absent' || !awaitsValidation(state)) return;
    const span = (this.deps.tracing ?? NO_TRACING).startBatchSpan(batchId, 'validate batch', { attributes: { 'spool.batch.id': batchId } });
    try {
      const outcome = await this.validateFile(batchId, state.facts);
      span.setAttributes(outcome);
    } catch (error) {
      span.fail(error instanceof Error ? error.message : String(error));
      throw error;
    } finally {
      span.end();
    }
  }

  /** Checks the input file and records the outcome; returns what the trace shows of it. */
  private async validateFile(batchId: string, facts: BatchFacts): Promise<Record<string, string | number>> {
    const fail = (errors: BatchError[]) => this.deps.batches.run(batchId, { type: 'FailBatch', at: this.deps.clock.nowSeconds(), errors }, CORRELATION);

    if (!this.deps.engines.engineFor(facts.model)) {
      await fail([{ code: 'model_not_available', line: null, message: `No engine serves model ${JSON.stringify(facts.model)}`, param: 'model' }]);
      return { 'spool.validation.failure': 'model_not_available' };
    }
    const { state: file } = await loadState(this.deps.eventStore, fileStreamName(facts.input_file_id), fileDecider);
    if (file.status !== 'active') {
      await fail([{ code: 'input_file_not_found', line: null, message: `Input file ${facts.input_file_id} no longer exists`, param: 'input_file_id' }]);
      return { 'spool.validation.failure': 'input_file_not_found' };
    }
    const maxBytes = this.deps.maxInputBytes ?? DEFAULT_UPLOAD_LIMITS.maxBatchFileBytes;
    if (file.file.bytes > maxBytes) {
      await fail([{ code: 'file_too_large', line: null, message: `Input file is ${file.file.bytes} bytes; the input file size limit is ${maxBytes} bytes`, param: 'input_file_id' }]);
      return { 'spool.validation.failure': 'file_too_large' };
    }

    let outcome: Awaited<ReturnType<BatchValidator['scan']>>;
    try {
      outcome = await this.scan(facts, file.file.blobKey);
    } catch (error) {
      if (!(error instanceof BlobNotFoundError)) throw error;
      await fail([{ code: 'input_file_not_found', line: null, message: `Input file ${facts.input_file_id} no longer exists`, param: 'input_file_id' }]);
      return { 'spool.validation.failure': 'input_file_not_found' };
    }
    const at = this.deps.clock.nowSeconds();
    // Over the account's queued work: the batch fails as a whole, as OpenAI fails one over its enqueued tokens.
    const limits = facts.account_id !== undefined && outcome.errors.length === 0 ? this.deps.quotas?.limitsOf(facts.account_id) : undefined;
    const refusal = limits ? queuedWorkRefusal(limits, this.deps.quotas!.queuedWorkOf(facts.account_id!, batchId), outcome.total, outcome.tokens) : undefined;
    if (refusal) outcome.errors.push(refusal);
    if (outcome.errors.length > 0) {
      await this.deps.batches.run(batchId, { type: 'RecordValidation', at, outcome: { ok: false, errors: outcome.errors } }, CORRELATION);
    } else {
      // Lines that share a prompt prefix run back to back: the chunks are cut from a work file
      // that lays them out so, rather than from the input file (as many lines each as the input
      // file's chunks would have).
      const order = this.deps.prefixOrder !== 'off' && this.deps.scratchDir ? outcome.prefixes.order() : undefined;
      const laidOut = order ? await new WorkFileWriter({ blobStore: this.deps.blobStore, scratchDir: this.deps.scratchDir! }).write(batchId, file.file.blobKey, outcome.requests, order, outcome.chunks.map((chunk) => chunk.lines), facts.account_id) : undefined;
      const validation = { total: outcome.total, input_blob_key: file.file.blobKey, chunks: laidOut?.chunks ?? outcome.chunks, ...(laidOut ? { work_blob_key: laidOut.key } : {}), estimated_tokens: outcome.tokens };
      await this.deps.batches.run(batchId, { type: 'RecordValidation', at, outcome: { ok: true, validation } }, CORRELATION);
      if (laidOut) this.deps.log.info({ batch_id: batchId, moved: movedLines(order!) }, 'batch lines laid out by shared prompt prefix');
    }
    this.deps.log.info({ batch_id: batchId, total: outcome.total, errors: outcome.errors.length }, 'batch validated');
    return { 'spool.batch.lines': outcome.total, 'spool.batch.chunks': outcome.chunks.length, 'spool.validation.errors': outcome.errors.length };
  }

  private async scan(facts: BatchFacts, blobKey: string): Promise<{ total: number; tokens: number; chunks: ChunkSpec[]; errors: BatchError[]; requests: RequestLines; prefixes: PrefixSignatureTable }> {
    const errors: BatchError[] = [];
    let errorCount = 0;
    const addError = (error: BatchError) => {
      errorCount += 1;
      if (errors.length < MAX_LISTED_ERRORS) errors.push(error);
    };
    const customIds = new Set<string>();
    let chunks: ChunkSpec[] = [];
    const spreadOver = Math.max(1, this.deps.spreadOver ?? 1);
    // With spreadOver > 1, every line's number and byte range (the range running on over the
    // blank lines after it), to cut the chunks once the count is known (at most
    // MAX_REQUESTS_PER_BATCH lines: three numbers each).
    const spreadable = spreadOver > 1 ? { numbers: [] as number[], starts: [] as number[], ends: [] as number[] } : undefined;
    let current: { index: number; first_line: number; lines: number; start: number; end: number } | undefined;
    let total = 0;
    let tokens = 0;
    let embeddingInputs = 0;
    // What the prefix-aware order needs of each request line: a few numbers, not the line.
    const requests = new RequestLines();
    const prefixes = new PrefixSignatureTable();

    // Each line checked as the splitter finds it in the bytes read, not through an async generator
    // (a promise and a result a line: some 3% of what a batch allocated).
    let stopped = false;
    const check = (line: PhysicalLine): void => {
      if (isBlank(line.text)) {
        if (current) current.end = line.end;
        if (spreadable?.ends.length) spreadable.ends[spreadable.ends.length - 1] = line.end;
        return;
      }
      total += 1;
      tokens += estimatedTokens(line.end - line.start);
      if (total > MAX_REQUESTS_PER_BATCH) {
        addError({ code: 'too_many_tasks', line: line.number, message: `The input file has more than ${MAX_REQUESTS_PER_BATCH} requests, the limit of requests per batch`, param: null });
        stopped = true;
        return;
      }
      if (spreadable) {
        spreadable.numbers.push(line.number);
        spreadable.starts.push(line.start);
        spreadable.ends.push(line.end);
      } else {
        if (!current || current.lines === this.deps.chunkLines) {
          if (current) chunks.push(current);
          current = { index: chunks.length, first_line: line.number, lines: 0, start: line.start, end: line.end };
        }
        current.lines += 1;
        current.end = line.end;
      }
      const checked = checkInputLine(line.text, line.number, facts);
      if (!checked.ok) addError(checked.error);
      else {
        if (customIds.has(checked.line.custom_id)) {
          addError({ code: 'duplicate_custom_id', line: line.number, message: `Line ${line.number}: custom_id ${JSON.stringify(checked.line.custom_id)} is not unique in the file`, param: 'custom_id' });
        }
        customIds.add(checked.line.custom_id);
        embeddingInputs += checked.embeddingInputs;
        if (errorCount === 0 && this.deps.prefixOrder !== 'off') {
          requests.add(line.number, Buffer.byteLength(line.text));
          prefixes.add(prefixSignature(facts.endpoint, checked.line.body));
        }
      }
    };
    const source = await this.deps.blobStore.get(blobKey);
    try {
      const lines = new PhysicalLineSplitter();
      for await (const bytes of source as AsyncIterable<Buffer>) {
        lines.push(bytes);
        for (let line = lines.next(); line && !stopped; line = lines.next()) check(line);
        if (stopped) break;
      }
      const last = stopped ? undefined : lines.finish();
      if (last) check(last);
    } finally {
      source.destroy();
    }
    if (current) chunks.push(current);
    else if (spreadable && spreadable.numbers.length > 0) {
      const cut = Math.ceil(spreadable.numbers.length / this.deps.chunkLines);
      chunks = spreadChunks(spreadable, Math.ceil(cut / spreadOver) * spreadOver);
    }

    if (embeddingInputs > MAX_EMBEDDING_INPUTS_PER_BATCH) {
      addError({
        code: 'too_many_embedding_inputs',
        line: null,
        message: `The batch has ${embeddingInputs} embedding inputs; the limit is ${MAX_EMBEDDING_INPUTS_PER_BATCH} embedding inputs across all requests`,
        param: 'input',
      });
    }
    if (total === 0) addError({ code: 'empty_file', line: null, message: 'The input file has no requests', param: 'input_file_id' });
    if (errorCount > errors.length) {
      errors[errors.length - 1] = { code: 'too_many_errors', line: null, message: `${errorCount} errors in all; the first ${errors.length - 1} are listed`, param: null };
    }
    return { total, tokens, chunks, errors, requests, prefixes };
  }
}

/** How many lines the order moves from their place in the file. */
function movedLines(order: readonly number[]): number {
  let moved = 0;
  for (let position = 0; position < order.length; position++) if (order[position] !== position) moved++;
  return moved;
}

/** Lines cut into `parts` chunks of sizes differing by one at most (one a line, for fewer lines). */
function spreadChunks(lines: { numbers: number[]; starts: number[]; ends: number[] }, parts: number): ChunkSpec[] {
  const total = lines.numbers.length;
  const count = Math.min(parts, total);
  const chunks: ChunkSpec[] = [];
  let first = 0;
  for (let index = 0; index < count; index++) {
    const size = Math.floor(total / count) + (index < total % count ? 1 : 0);
    const last = first + size - 1;
    chunks.push({ index, first_line: lines.numbers[first]!, lines: size, start: lines.starts[first]!, end: lines.ends[last]! });
    first = last + 1;
  }
  return chunks;
}
