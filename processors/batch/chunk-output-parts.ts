import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { LineOutcomeLog } from '../../src/application/line-outcomes.js';
import { type BlobStore, BlobNotFoundError } from '../../src/blob-store/blob-store.js';
import { type OutputKind, renderChunk } from '../../src/domain/batch-output.js';
import { chunkPartBlobKey, chunkPartsPrefix } from '../../src/domain/blob-keys.js';
import { type LineCompletedData, type LineFailedData, lineOutcomeFromText } from '../../src/domain/line-outcome.js';
import type { RecordedEvent } from '../../src/event-store/event-store.js';
import type { RenderedParts } from './chunk-outcome-recorder.js';

/**
 * A chunk's outcome events as outcomes, in line order. Where the log gives an event's JSON text,
 * its body stays that text: rendered, it has the bytes it had as the chunk ran (and is not parsed).
 */
export function inLineOrder(events: readonly RecordedEvent[]): (LineCompletedData | LineFailedData)[] {
  return events.map(outcomeOf).sort((a, b) => a.line - b.line);
}

function outcomeOf(event: RecordedEvent): LineCompletedData | LineFailedData {
  const text = event.serializedData;
  const type = event.type === 'LineFailed' ? 'LineFailed' : 'LineCompleted';
  return (text === undefined ? undefined : lineOutcomeFromText(type, text)) ?? (event.data as unknown as LineCompletedData | LineFailedData);
}

/** A chunk as the parts need it: its batch, index and how many lines it has. */
export interface PartChunk {
  readonly batch_id: string;
  readonly chunk: number;
  readonly lines: number;
  /** Its batch's account: the parts go under the account's prefix. */
  readonly account_id?: string | null;
  /** Its batch's metadata asks for `served_by` in its lines (servedByInOutput). */
  readonly served_by?: boolean;
}

/**
 * Each chunk's output and error lines, rendered once its last line has an outcome and kept in the
 * blob store until the batch is finalized: the finalizer then copies them instead of reading and
 * rendering every outcome of the batch after its last line (about half a second for 50,000 lines,
 * bench/FINDINGS.md). Parts are derived data: one that is missing (a process stopped before
 * writing it, a chunk finished by cancellation) is rendered from the outcomes as before, and one
 * written twice holds the same bytes. Only batches that run in input order have parts: a work
 * file's chunks hold lines from all over the input, which the finalizer puts back in order.
 */
export class ChunkOutputParts {
  /**
   * Writes under way, by batch: a run checks that its batch is not finalizing before it writes its
   * chunk's parts, and the batch may begin finalizing while the parts are being written. discard()
   * waits for them, so that a finalizer of this process never leaves a part written after it
   * (one instance serves the runner and the finalizer of a process); a part another process
   * writes late is the debris sweeper's.
   */
  private readonly writing = new Map<string, Set<Promise<boolean>>>();

  constructor(private readonly deps: { blobStore: BlobStore; outcomes: LineOutcomeLog; log: Pick<Logger, 'warn'> }) {}

  /**
   * Renders the chunk's parts if every line has its outcome; true when they were written.
   * `rendered`: the parts as the run that recorded every outcome of the chunk rendered them line
   * by line (ChunkOutcomeRecorder.renderedParts), the same bytes without reading the outcomes back.
   */
  write(chunk: PartChunk, rendered?: RenderedParts): Promise<boolean> {
    const writing = this.writeParts(chunk, rendered);
    const ofBatch = this.writing.get(chunk.batch_id) ?? new Set();
    this.writing.set(chunk.batch_id, ofBatch.add(writing));
    // The batch's set is removed only once empty, so while this write is in it, it is the batch's.
    const settled = () => {
      ofBatch.delete(writing);
      if (ofBatch.size === 0) this.writing.delete(chunk.batch_id);
    };
    writing.then(settled, settled);
    return writing;
  }

  private async writeParts(chunk: PartChunk, rendered?: RenderedParts): Promise<boolean> {
    let parts = rendered;
    if (!parts) {
      const outcomes = await this.outcomesOf(chunk);
      if (!outcomes) return false;
      parts = { output: Buffer.from(renderChunk(chunk.batch_id, 'output', outcomes, chunk.served_by)), error: Buffer.from(renderChunk(chunk.batch_id, 'error', outcomes, chunk.served_by)) };
    }
    // The output part even empty: a missing one then only ever means "render it from the
    // outcomes", also when another finalizer removed the parts between this one's reads of them.
    // No error part for a chunk without errors (most chunks): the finalizer knows from the chunk's
    // failed count that it has no error lines, and half of a batch's parts were empty ones.
    for (const kind of ['error', 'output'] as const) {
      if (kind === 'error' && parts.error.length === 0) continue;
      await this.deps.blobStore.put(chunkPartBlobKey(chunk.batch_id, chunk.chunk, kind, chunk.account_id ?? undefined), Readable.from([parts[kind]]));
    }
    return true;
  }

  /** Like write(), for a caller that goes on either way: a part not written is only work for the finalizer. */
  async tryWrite(chunk: PartChunk, rendered?: RenderedParts): Promise<void> {
    try {
      await this.write(chunk, rendered);
    } catch (error) {
      this.deps.log.warn({ err: error, batch_id: chunk.batch_id, chunk: chunk.chunk }, 'chunk output not rendered ahead; the finalizer renders it');
    }
  }

  /** The chunk's rendered lines of one file, or undefined when that part is not there (render them from the outcomes). */
  open(batchId: string, chunk: number, kind: OutputKind, accountId?: string): Promise<Readable | undefined> {
    return this.get(chunkPartBlobKey(batchId, chunk, kind, accountId));
  }

  /** Removes the batch's parts once its files are written, after any of this process's writes of them under way. */
  async discard(batchId: string, accountId?: string): Promise<void> {
    const writing = this.writing.get(batchId);
    if (writing) await Promise.allSettled([...writing]);
    for await (const key of this.deps.blobStore.list(chunkPartsPrefix(batchId, accountId))) await this.deps.blobStore.delete(key);
  }

  /** The chunk's outcomes in line order, or undefined while some line has none. */
  private async outcomesOf(chunk: PartChunk): Promise<(LineCompletedData | LineFailedData)[] | undefined> {
    const events = await this.deps.outcomes.read(chunk.batch_id, chunk.chunk);
    return events.length < chunk.lines ? undefined : inLineOrder(events);
  }

  private async get(key: string): Promise<Readable | undefined> {
    try {
      return await this.deps.blobStore.get(key);
    } catch (error) {
      if (error instanceof BlobNotFoundError) return undefined;
      throw error;
    }
  }
}
