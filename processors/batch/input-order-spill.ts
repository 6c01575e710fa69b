import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { PRIVATE_FILE_MODE, makePrivateDirectory } from '../../src/platform/private-files.js';

/** Bytes handed on at once when reading back in line order. */
const READ_BACK_BYTES = 256 * 1024;

/**
 * Puts output lines that arrive in any line order back into line order, through a scratch file:
 * each line's text is appended as it comes, and read back by line number. Memory holds two
 * numbers per line, not the text, so a batch's output file is written in input order whatever
 * order its chunks ran in.
 */
export class InputOrderSpill {
  private readonly path: string;
  private readonly fd: number;
  private readonly places = new Map<number, { offset: number; bytes: number }>();
  private size = 0;

  constructor(scratchDir: string, name: string) {
    makePrivateDirectory(scratchDir);
    this.path = join(scratchDir, `${name}.spill.${randomBytes(6).toString('hex')}`);
    this.fd = openSync(this.path, 'w+', PRIVATE_FILE_MODE);
  }

  /** Texts of lines, appended in one write. */
  add(lines: readonly { line: number; text: string }[]): void {
    if (lines.length === 0) return;
    const buffer = Buffer.from(lines.map((entry) => entry.text).join(''));
    let offset = this.size;
    for (const { line, text } of lines) {
      const bytes = Buffer.byteLength(text);
      this.places.set(line, { offset, bytes });
      offset += bytes;
    }
    let written = 0;
    while (written < buffer.length) written += writeSync(this.fd, buffer, written, buffer.length - written, this.size + written);
    this.size += buffer.length;
  }

  /** Every text added, in line order, a few hundred KiB at a time; the scratch file is removed after. */
  *inLineOrder(): Generator<Buffer> {
    try {
      const lines = [...this.places.keys()].sort((a, b) => a - b);
      let out = Buffer.allocUnsafe(READ_BACK_BYTES);
      let used = 0;
      for (const line of lines) {
        const { offset, bytes } = this.places.get(line)!;
        if (used + bytes > out.length && used > 0) {
          yield Buffer.from(out.subarray(0, used));
          used = 0;
        }
        if (bytes > out.length) out = Buffer.allocUnsafe(bytes);
        let read = 0;
        while (read < bytes) {
          const got = readSync(this.fd, out, used + read, bytes - read, offset + read);
          if (got === 0) throw new Error('output scratch file ended early');
          read += got;
        }
        used += bytes;
      }
      if (used > 0) yield Buffer.from(out.subarray(0, used));
    } finally {
      this.close();
    }
  }

  /** Removes the scratch file (also when reading back is abandoned). */
  close(): void {
    try {
      closeSync(this.fd);
    } catch {
      // closed already
    }
    try {
      unlinkSync(this.path);
    } catch {
      // removed already
    }
  }
}
