import type { OutputKind } from '../../src/domain/batch-output.js';
import type { RenderedParts } from './chunk-outcome-recorder.js';

/**
 * Rendered bytes held at most for chunks whose finalizer has not come for them: a thousand
 * batches of twenty lines waiting at once hold about 6 MiB.
 */
const MAX_BYTES = 8 * 1024 * 1024;
/** Chunks held at most, however little text they have. */
const MAX_CHUNKS = 4096;

interface Held {
  output: Buffer | undefined;
  error: Buffer | undefined;
  readonly bytes: number;
}

/**
 * The output and error lines of a batch's only chunk, as the run that recorded the outcome of
 * every line of it rendered them, handed to the finalizer of the same process: it copies them
 * instead of reading the chunk's outcomes back from the log and rendering them again (in a wave of
 * many small batches that read was about 2% of the main thread; bench/FINDINGS.md, 2026-11-30
 * night). A batch of several chunks has its parts in the blob store instead (ChunkOutputParts).
 *
 * Derived data, in memory only: where a chunk is not here (another process finalizes it, the
 * process restarted, it was dropped for room, the finalizer came before the run handed it over),
 * the finalizer renders the outcomes as it always did, and the bytes are the same (the run renders
 * each line with outputLine of the outcome it recorded, and hands nothing over where another
 * writer recorded some line first).
 */
export class RenderedChunkHandoff {
  private readonly held = new Map<string, Held>();
  private bytes = 0;

  constructor(private readonly limits: { bytes: number; chunks: number } = { bytes: MAX_BYTES, chunks: MAX_CHUNKS }) {}

  /** Holds the chunk's rendered lines for its finalizer; the oldest held are dropped past the limits. */
  offer(batchId: string, chunk: number, parts: RenderedParts): void {
    const key = keyOf(batchId, chunk);
    this.drop(key);
    const bytes = parts.output.length + parts.error.length;
    if (bytes > this.limits.bytes) return;
    this.held.set(key, { output: parts.output, error: parts.error, bytes });
    this.bytes += bytes;
    for (const [oldest] of this.held) {
      if (this.bytes <= this.limits.bytes && this.held.size <= this.limits.chunks) break;
      this.drop(oldest);
    }
  }

  /**
   * The chunk's lines of one file, once: undefined where they were not handed over (render them
   * from the outcomes). The chunk is let go once its output lines are taken and its error lines
   * too, or it has none (the finalizer asks for a chunk's error lines only where some line failed).
   */
  take(batchId: string, chunk: number, kind: OutputKind): Buffer | undefined {
    const key = keyOf(batchId, chunk);
    const held = this.held.get(key);
    if (!held) return undefined;
    const text = held[kind];
    held[kind] = undefined;
    if (held.output === undefined && !held.error?.length) this.drop(key);
    return text;
  }

  /** Chunks held now. */
  get size(): number {
    return this.held.size;
  }

  private drop(key: string): void {
    const held = this.held.get(key);
    if (!held) return;
    this.held.delete(key);
    this.bytes -= held.bytes;
  }
}

const keyOf = (batchId: string, chunk: number) => `${batchId}/${chunk}`;
