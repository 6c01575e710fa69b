import type { Readable } from 'node:stream';

export interface PhysicalLine {
  /** 1-based line number in the file. */
  readonly number: number;
  /** The line's text without its line ending. */
  readonly text: string;
  /** Byte offset of the line's first byte. */
  readonly start: number;
  /** Byte offset just past the line, its line ending included. */
  readonly end: number;
}

const NEWLINE = 0x0a;

/**
 * Splits bytes handed over in chunks into lines with their exact byte ranges, which readline
 * cannot give, one line when asked: a chunk's lines are decoded as they are taken, not all at
 * once, so lines not taken yet are bytes, not strings. Holds at most one line and one chunk.
 */
export class PhysicalLineSplitter {
  private number: number;
  private offset: number;
  private chunk: Buffer | undefined;
  private from = 0;
  // A line's bytes from earlier chunks; most lines lie within one chunk and are read straight from it
  // (every batch line passes here: no slice, array or concatenation for those).
  private carry: Buffer[] = [];
  private carryBytes = 0;

  constructor(firstNumber = 1, firstOffset = 0) {
    this.number = firstNumber;
    this.offset = firstOffset;
  }

  /** The next chunk of bytes: only once next() has said the last one has no whole line left (undefined). */
  push(chunk: Buffer): void {
    if (this.chunk) throw new Error('a chunk pushed before the last one was read through');
    this.chunk = chunk;
    this.from = 0;
  }

  /** The next whole line of what was pushed; undefined when the rest waits for the next chunk. */
  next(): PhysicalLine | undefined {
    const chunk = this.chunk;
    if (!chunk) return undefined;
    const from = this.from;
    const at = chunk.indexOf(NEWLINE, from);
    if (at === -1) {
      if (from < chunk.length) {
        this.carry.push(chunk.subarray(from));
        this.carryBytes += chunk.length - from;
      }
      this.chunk = undefined;
      return undefined;
    }
    this.from = at + 1;
    if (this.carryBytes === 0) return this.emit(chunk.toString('utf8', from, at), at - from, true);
    this.carry.push(chunk.subarray(from, at));
    const bytes = this.carryBytes + at - from;
    const line = this.emit(Buffer.concat(this.carry, bytes).toString('utf8'), bytes, true);
    this.carry = [];
    this.carryBytes = 0;
    return line;
  }

  /** The bytes ended: their last line where it had no line ending. */
  finish(): PhysicalLine | undefined {
    if (this.chunk) throw new Error('finished before the last chunk was read through');
    if (this.carryBytes === 0) return undefined;
    const bytes = this.carryBytes;
    const line = this.emit(Buffer.concat(this.carry, bytes).toString('utf8'), bytes, false);
    this.carry = [];
    this.carryBytes = 0;
    return line;
  }

  private emit(text: string, bytes: number, newline: boolean): PhysicalLine {
    const line = { number: this.number, text: text.endsWith('\r') ? text.slice(0, -1) : text, start: this.offset, end: this.offset + bytes + (newline ? 1 : 0) };
    this.number += 1;
    this.offset = line.end;
    return line;
  }
}

/** A byte stream's lines, each with its exact byte range (PhysicalLineSplitter over the stream's chunks). */
export async function* physicalLines(source: Readable | AsyncIterable<Buffer>, firstNumber = 1, firstOffset = 0): AsyncGenerator<PhysicalLine> {
  const lines = new PhysicalLineSplitter(firstNumber, firstOffset);
  for await (const chunk of source as AsyncIterable<Buffer>) {
    lines.push(chunk);
    for (let line = lines.next(); line; line = lines.next()) yield line;
  }
  const last = lines.finish();
  if (last) yield last;
}
