import type { Readable } from 'node:stream';
import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import type { BatchLifecycle } from '../../src/application/batch-lifecycle.js';
import type { FileRegistry } from '../../src/application/file-registry.js';
import type { LineOutcomeLog } from '../../src/application/line-outcomes.js';
import type { LineCompletedData, LineFailedData } from '../../src/domain/line-outcome.js';
import { type OutputKind, outputFileId, outputLine, renderChunk, servedByInOutput } from '../../src/domain/batch-output.js';
import type { Clock } from '../../src/platform/clock.js';
import { mayBeginFinalizing, readyToFinish } from '../../src/domain/batch.js';
import type { FileFacts } from '../../src/domain/file.js';
import { type ChunkOutputParts, inLineOrder } from './chunk-output-parts.js';
import type { BatchRow, BatchesQueries, ChunkRow } from '../../projections/batches-projection.js';
import { NO_TRACING, type Tracing } from '../../src/observability/tracing.js';
import { lentPieces } from '../../src/blob-store/file-content-stream.js';
import { InputOrderSpill } from './input-order-spill.js';
import type { RenderedChunkHandoff } from './rendered-chunk-handoff.js';
import { RunsByKey } from '../../src/platform/runs-by-key.js';

/**
 * Chunks' parts opened ahead of the one being copied: one part after another, each open waiting on
 * the disk (or S3), left the finalizer idle about 40% of the time.
 */
const PARTS_AHEAD = 4;

/**
 * The one buffer a file's parts are copied through (see FileContentStream.lend): read into fresh
 * buffers, the 10 MB of a 50,000-line batch's parts piled up as garbage between two young
 * collections, and left the process 7–9 MiB larger at its end (bench/FINDINGS.md, memory).
 */
const COPY_BUFFER_BYTES = 64 * 1024;

const CORRELATION = { correlationId: 'batch-finalizer' };

/**
 * Ends a batch once every line has an outcome: writes the output file (successes) and, if any
 * line failed, the error file, each line in input order, then records completed, cancelled or
 * expired. Every step may be repeated after a crash: the files' ids and contents are derived
 * from the batch, so a second run rewrites the same bytes and registers nothing twice.
 */
export class BatchFinalizer {
  constructor(
    private readonly deps: {
      batches: BatchLifecycle;
      queries: BatchesQueries;
      outcomes: LineOutcomeLog;
      files: FileRegistry;
      clock: Clock;
      log: Pick<Logger, 'info' | 'warn'>;
      /** Told of each finished batch's margin: its deadline minus its completion, in seconds. */
      onFinished?: (deadlineMarginSeconds: number | undefined) => void;
      tracing?: Tracing;
      /** Where output lines are put back in input order when the chunks ran a work file's order. */
      scratchDir?: string;
      /** Removes a batch's work file once the batch is over. */
      discardWorkFile?: (key: string) => Promise<void>;
      /** Chunks' lines rendered while the batch ran: copied instead of rendered again. */
      parts?: ChunkOutputParts;
      /** A batch's only chunk as this process's runner rendered it, where it runs one. */
      renderedChunks?: Pick<RenderedChunkHandoff, 'take'>;
    },
  ) {}

  finalize(batchId: string): Promise<void> {
    // Several finalize messages of one batch may be handled at once (messages of a partition run
    // together, and each page of its outcomes sends one): one run at a time per batch, a later
    // message's after it, so none reads the batch from before the event it was sent for.
    return this.runs.run(batchId, () => this.finalizeOnce(batchId));
  }

  private readonly runs = new RunsByKey();

  private async finalizeOnce(batchId: string): Promise<void> {
    const batch = this.deps.queries.get(batchId);
    if (!batch || !readyToFinish({ ...batch, settled: batch.completed + batch.failed })) return;
    const span = (this.deps.tracing ?? NO_TRACING).startBatchSpan(batchId, 'finalize batch', { attributes: { 'spool.batch.id': batchId, 'spool.batch.completed': batch.completed, 'spool.batch.failed': batch.failed } });
    try {
      await this.finish(batch);
      span.setAttributes({ 'spool.batch.status': this.deps.queries.get(batchId)?.status ?? 'unknown' });
    } catch (error) {
      span.fail(error instanceof Error ? error.message : String(error));
      throw error;
    } finally {
      span.end();
    }
  }

  private async finish(found: BatchRow): Promise<void> {
    const batchId = found.id;
    let batch = found;
    if (mayBeginFinalizing(batch)) {
      await this.deps.batches.run(batchId, { type: 'BeginFinalizing', at: this.deps.clock.nowSeconds() }, CORRELATION);
      batch = this.deps.queries.get(batchId)!;
    }
    let outputFileId: string | null = null;
    let errorFileId: string | null = null;
    // Chunks of the output file copied from parts rendered while the batch ran (for the log).
    let renderedAhead = 0;
    // Only a batch that ran in input order in more than one chunk has parts to remove.
    let mayHaveParts = false;
    if (batch.in_progress_at !== null) {
      // Both files at once: each waits mostly on the disk (or S3), and their registrations may
      // share a commit.
      const [output, errors] = await Promise.all([this.writeFile(batch, 'output'), batch.failed > 0 ? this.writeFile(batch, 'error') : undefined]);
      outputFileId = output.fileId;
      renderedAhead = output.partChunks;
      mayHaveParts = output.chunks > 1;
      errorFileId = errors?.fileId ?? null;
    }
    await this.deps.batches.run(
      batchId,
      { type: 'FinishBatch', at: this.deps.clock.nowSeconds(), output_file_id: outputFileId, error_file_id: errorFileId, served_by: this.deps.queries.servedBy(batchId) },
      CORRELATION,
    );
    // The work file has served its purpose; a removal cut short is the debris sweeper's to finish.
    if (batch.work_blob_key && this.deps.discardWorkFile) await this.deps.discardWorkFile(batch.work_blob_key).catch(() => undefined);
    // So have the chunks' parts; one a late writer puts back is the debris sweeper's. A batch of one
    // chunk has none to look for (a folder read for each of many small batches).
    if (mayHaveParts) await this.deps.parts?.discard(batchId, batch.account_id ?? undefined).catch(() => undefined);
    const finishedAt = this.deps.clock.nowSeconds();
    const margin = batch.expires_at === null ? undefined : batch.expires_at - finishedAt;
    this.deps.onFinished?.(margin);
    const took = finishedAt - batch.created_at;
    this.deps.log.info(
      { batch_id: batchId, status: this.deps.queries.get(batchId)?.status, lines: batch.completed + batch.failed, completed: batch.completed, failed: batch.failed, took_seconds: took, deadline_margin_seconds: margin ?? null, output_file_id: outputFileId, error_file_id: errorFileId, chunks_rendered_ahead: renderedAhead },
      `batch finished: ${batch.completed} of ${batch.completed + batch.failed} lines completed, ${batch.failed} failed, in ${took}s`,
    );
  }

  /**
   * Writes and registers the batch's output or error file; `partChunks`: how many chunks were
   * copied from their parts; `chunks`: how many chunks of the input it was written from (0 for a work file's).
   */
  private async writeFile(batch: BatchRow, kind: OutputKind): Promise<{ fileId: string; partChunks: number; chunks: number }> {
    const fileId = outputFileId(batch.id, kind);
    const store = async (useParts: boolean) => {
      const copied = { partChunks: 0, lines: 0, chunks: 0 };
      const content = await this.deps.files.storeContent(fileId, this.lines(batch, kind, copied, useParts), { bytes: Number.MAX_SAFE_INTEGER, name: 'output file size' }, batch.account_id ?? undefined);
      return { content, copied };
    };
    let { content, copied } = await store(true);
    // Every completed line is in the output file and every failed one in the error file. A part
    // short of its chunk's lines (read from a store whose put is not atomic while the part was
    // written again: s3rver truncates an object it replaces) must not make a short file.
    const expected = kind === 'output' ? batch.completed : batch.failed;
    if (copied.partChunks > 0 && copied.lines !== expected) {
      this.deps.log.warn({ batch_id: batch.id, kind, lines: copied.lines, expected }, 'chunk parts did not hold every line of the file: rendering it from the outcomes');
      ({ content, copied } = await store(false));
    }
    const createdAt = this.deps.clock.nowSeconds();
    const expiresAfter = batch.output_expires_after ? (JSON.parse(batch.output_expires_after) as { seconds: number }) : null;
    const facts: FileFacts = {
      fileId,
      filename: `${batch.id}_${kind}.jsonl`,
      purpose: 'batch_output',
      bytes: content.bytes,
      sha256: content.sha256,
      blobKey: content.blobKey,
      createdAt,
      expiresAt: expiresAfter ? createdAt + expiresAfter.seconds : null,
      // The batch's output and error files are its account's.
      ...(batch.account_id !== null ? { accountId: batch.account_id } : {}),
    };
    const registered = await this.deps.files.register(facts, CORRELATION);
    // Already registered by a run that stopped before finishing the batch: the same file.
    if (E.isLeft(registered) && registered.left.kind !== 'conflict') throw new Error(registered.left.message);
    return { fileId, partChunks: copied.partChunks, chunks: copied.chunks };
  }

  /**
   * The file's lines in input order, chunk by chunk: memory holds one chunk's outcomes. Chunks of
   * a work file hold lines from all over the input: their lines are put back in order on local disk.
   */
  private async *lines(batch: BatchRow, kind: OutputKind, copied: { partChunks: number; lines: number; chunks: number }, useParts: boolean): AsyncGenerator<string | Buffer> {
    if (!batch.work_blob_key) {
      const all = this.deps.queries.chunks(batch.id);
      copied.chunks = all.length;
      // A chunk none of whose lines failed has no error lines (and its run wrote no error part).
      const chunks = kind === 'error' ? all.filter((chunk) => chunk.failed > 0) : all;
      const ahead = new Map<number, Promise<Readable | undefined>>();
      // A batch of one chunk has no parts (the runner leaves them to this rendering).
      const parts = useParts && all.length > 1 ? this.deps.parts : undefined;
      const copyBuffer = Buffer.allocUnsafe(COPY_BUFFER_BYTES);
      const openAhead = (from: number) => {
        if (!parts) return;
        for (let at = from; at < Math.min(chunks.length, from + PARTS_AHEAD); at++) {
          if (ahead.has(at)) continue;
          const opening = parts.open(batch.id, chunks[at]!.chunk, kind, batch.account_id ?? undefined).then((part) => {
            // An error of a part opened ahead is seen where it is copied.
            part?.on('error', () => undefined);
            return part;
          });
          opening.catch(() => undefined);
          ahead.set(at, opening);
        }
      };
      try {
        for (let at = 0; at < chunks.length; at++) {
          openAhead(at);
          const part = await ahead.get(at);
          ahead.delete(at);
          if (part) {
            copied.partChunks += 1;
            for await (const piece of lentPieces(part, copyBuffer)) {
              copied.lines += newlines(piece);
              yield piece;
            }
            continue;
          }
          // A batch's only chunk was mostly rendered by this process's run of it, just now.
          const handedOver = useParts && all.length === 1 ? this.deps.renderedChunks?.take(batch.id, chunks[at]!.chunk, kind) : undefined;
          const text = handedOver ?? renderChunk(batch.id, kind, await this.outcomesOf(batch.id, chunks[at]!), servedByInOutput(batch.metadata));
          copied.lines += newlines(text);
          if (text.length > 0) yield text;
        }
      } finally {
        // Parts opened ahead of a copy that stopped are closed.
        for (const opening of ahead.values()) opening.then((part) => part?.destroy(), () => undefined);
      }
      return;
    }
    if (!this.deps.scratchDir) throw new Error(`batch ${batch.id} ran a work file, and this finalizer has no scratch directory to put its lines in order`);
    const spill = new InputOrderSpill(this.deps.scratchDir, `${batch.id}.${kind}`);
    const servedBy = servedByInOutput(batch.metadata);
    try {
      for await (const outcomes of this.chunkOutcomes(batch)) {
        const lines: { line: number; text: string }[] = [];
        for (const outcome of outcomes) {
          const text = outputLine(batch.id, kind, outcome, servedBy);
          if (text) lines.push({ line: outcome.line, text });
        }
        spill.add(lines);
      }
      yield* spill.inLineOrder();
    } finally {
      spill.close();
    }
  }

  /** Each chunk's outcomes in line order, one chunk at a time. */
  private async *chunkOutcomes(batch: BatchRow): AsyncGenerator<(LineCompletedData | LineFailedData)[]> {
    for (const chunk of this.deps.queries.chunks(batch.id)) yield await this.outcomesOf(batch.id, chunk);
  }

  private async outcomesOf(batchId: string, chunk: ChunkRow): Promise<(LineCompletedData | LineFailedData)[]> {
    const events = await this.deps.outcomes.read(batchId, chunk.chunk);
    if (events.length < chunk.lines) throw new Error(`batch ${batchId} chunk ${chunk.chunk} has ${events.length} of ${chunk.lines} outcomes`);
    return inLineOrder(events);
  }
}

/** Lines in a piece of a JSONL file: each ends with a newline. */
function newlines(piece: string | Buffer): number {
  let count = 0;
  if (typeof piece === 'string') for (let at = piece.indexOf('\n'); at !== -1; at = piece.indexOf('\n', at + 1)) count += 1;
  else for (let at = piece.indexOf(0x0a); at !== -1; at = piece.indexOf(0x0a, at + 1)) count += 1;
  return count;
}
