/** A chunk's output and error file lines, each in line order, as the bytes the files hold. */
export interface RenderedParts {
  readonly output: Buffer;
  readonly error: Buffer;
}

/** The first block of a chunk's rendered bytes; it doubles as it fills. */
const FIRST_BLOCK_BYTES = 16 * 1024;
/** UTF-8 bytes a UTF-16 code unit takes at most (a surrogate pair's two take four). */
const MAX_BYTES_PER_UNIT = 3;

/**
 * A chunk's rendered output and error lines as they come, in any order, each at its place in the
 * chunk: encoded at once into one growing block of bytes, with where each line lies in it. A line's
 * text, held as a string until the chunk ends (200 lines a chunk, each answered at its own time),
 * outlived young collections and was copied into the old generation, and the chunk's strings were
 * joined and copied again when its part was written: held as bytes, outside the JavaScript heap,
 * the text is garbage as soon as it is encoded (bench/FINDINGS.md, 2026-12-02, morning).
 */
export class RenderedLines {
  private bytes = Buffer.allocUnsafe(FIRST_BLOCK_BYTES);
  private used = 0;
  /** Per place: where its line starts in `bytes` (undefined: none yet), where it ends, and whether it is an error line. */
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];
  private readonly failed: boolean[] = [];
  private count = 0;

  /** Lines rendered so far (each place once). */
  get lines(): number {
    return this.count;
  }

  /** The line at `place`, rendered (`text` ends with its newline); a place set again keeps its latest line. */
  set(place: number, failed: boolean, text: string): void {
    this.room(text.length * MAX_BYTES_PER_UNIT);
    const written = this.bytes.write(text, this.used, 'utf8');
    if (this.starts[place] === undefined) this.count += 1;
    this.starts[place] = this.used;
    this.ends[place] = this.used + written;
    this.failed[place] = failed;
    this.used += written;
  }

  /** The chunk's output and error lines, each in place order (the places without a line are skipped). */
  parts(): RenderedParts {
    let outputBytes = 0;
    let errorBytes = 0;
    for (let place = 0; place < this.starts.length; place++) {
      const start = this.starts[place];
      if (start === undefined) continue;
      if (this.failed[place]) errorBytes += this.ends[place]! - start;
      else outputBytes += this.ends[place]! - start;
    }
    const output = Buffer.allocUnsafe(outputBytes);
    const error = Buffer.allocUnsafe(errorBytes);
    let outputAt = 0;
    let errorAt = 0;
    for (let place = 0; place < this.starts.length; place++) {
      const start = this.starts[place];
      if (start === undefined) continue;
      if (this.failed[place]) errorAt += this.bytes.copy(error, errorAt, start, this.ends[place]);
      else outputAt += this.bytes.copy(output, outputAt, start, this.ends[place]);
    }
    return { output, error };
  }

  /** Makes room for `bytes` more. */
  private room(bytes: number): void {
    if (this.used + bytes <= this.bytes.length) return;
    let size = this.bytes.length * 2;
    while (size < this.used + bytes) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    this.bytes.copy(grown, 0, 0, this.used);
    this.bytes = grown;
  }
}
