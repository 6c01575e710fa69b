/** A chunk's output and error file lines, each in line order, as the bytes the files hold. */
export interface RenderedParts {
  readonly output: Buffer;
  readonly error: Buffer;
}

/** A block of a chunk's rendered bytes: lines are written into it until the next might not fit, then into a new one. */
const BLOCK_BYTES = 32 * 1024;
/** UTF-8 bytes a UTF-16 code unit takes at most (a surrogate pair's two take four). */
const MAX_BYTES_PER_UNIT = 3;

/**
 * Whether `text` fits in `room` bytes: its length and its worst case decide most lines; the bytes
 * are counted only between the two. Judged by its worst case alone, an embeddings output line (over
 * 8 KB of digits, three times that at worst) took a 32 KiB block of its own, and a batch of them held
 * four times its bytes.
 */
function fits(text: string, room: number): boolean {
  if (text.length > room) return false;
  return text.length * MAX_BYTES_PER_UNIT <= room || Buffer.byteLength(text, 'utf8') <= room;
}

/**
 * A chunk's rendered output and error lines as they come, in any order, each at its place in the
 * chunk: encoded at once into blocks of bytes, with where each line lies in them. A line's text,
 * held as a string until the chunk ends (200 lines a chunk, each answered at its own time),
 * outlived young collections and was copied into the old generation, and the chunk's strings were
 * joined and copied again when its part was written: held as bytes, outside the JavaScript heap,
 * the text is garbage as soon as it is encoded (bench/FINDINGS.md, 2026-12-02, morning). Blocks of
 * one size, not one block doubled as it fills: a doubled block left its smaller predecessors to
 * the allocator for every chunk, and a batch's peak RSS rose by some 4 MiB.
 */
export class RenderedLines {
  private readonly blocks: Buffer[] = [];
  /** Bytes used of the last block. */
  private used = 0;
  /** Per place: its line's block (undefined: none yet), where the line starts and ends in it, and whether it is an error line. */
  private readonly blockOf: number[] = [];
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];
  private readonly failed: boolean[] = [];
  private count = 0;

  /** Bytes of the blocks the lines are held in, used or not. */
  get heldBytes(): number {
    let bytes = 0;
    for (const block of this.blocks) bytes += block.length;
    return bytes;
  }

  /** Lines rendered so far (each place once). */
  get lines(): number {
    return this.count;
  }

  /** The line at `place`, rendered (`text` ends with its newline); a place set again keeps its latest line. */
  set(place: number, failed: boolean, text: string): void {
    let block = this.blocks.at(-1);
    if (!block || !fits(text, block.length - this.used)) {
      block = Buffer.allocUnsafe(Math.max(BLOCK_BYTES, text.length * MAX_BYTES_PER_UNIT));
      this.blocks.push(block);
      this.used = 0;
    }
    const written = block.write(text, this.used, 'utf8');
    if (this.blockOf[place] === undefined) this.count += 1;
    this.blockOf[place] = this.blocks.length - 1;
    this.starts[place] = this.used;
    this.ends[place] = this.used + written;
    this.failed[place] = failed;
    this.used += written;
  }

  /** The chunk's output and error lines, each in place order (the places without a line are skipped). */
  parts(): RenderedParts {
    let outputBytes = 0;
    let errorBytes = 0;
    for (let place = 0; place < this.blockOf.length; place++) {
      if (this.blockOf[place] === undefined) continue;
      const bytes = this.ends[place]! - this.starts[place]!;
      if (this.failed[place]) errorBytes += bytes;
      else outputBytes += bytes;
    }
    const output = Buffer.allocUnsafe(outputBytes);
    const error = Buffer.allocUnsafe(errorBytes);
    let outputAt = 0;
    let errorAt = 0;
    for (let place = 0; place < this.blockOf.length; place++) {
      const block = this.blockOf[place];
      if (block === undefined) continue;
      if (this.failed[place]) errorAt += this.blocks[block]!.copy(error, errorAt, this.starts[place], this.ends[place]);
      else outputAt += this.blocks[block]!.copy(output, outputAt, this.starts[place], this.ends[place]);
    }
    return { output, error };
  }
}
