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
 * Splits a byte stream into lines with their exact byte ranges, which readline cannot give.
 * Holds at most one line and one chunk in memory.
 */
export async function* physicalLines(source: Readable | AsyncIterable<Buffer>, firstNumber = 1, firstOffset = 0): AsyncGenerator<PhysicalLine> {
  let number = firstNumber;
  let offset = firstOffset;
  // A line's bytes from earlier chunks; most lines lie within one chunk and are read straight from it
  // (every batch line passes here: no slice, array or concatenation for those).
  let carry: Buffer[] = [];
  let carryBytes = 0;
  const emit = (text: string, bytes: number, newline: boolean): PhysicalLine => {
    const line = { number, text: text.endsWith('\r') ? text.slice(0, -1) : text, start: offset, end: offset + bytes + (newline ? 1 : 0) };
    number += 1;
    offset = line.end;
    return line;
  };
  for await (const chunk of source as AsyncIterable<Buffer>) {
    let from = 0;
    for (let at = chunk.indexOf(NEWLINE, from); at !== -1; at = chunk.indexOf(NEWLINE, from)) {
      if (carryBytes === 0) {
        yield emit(chunk.toString('utf8', from, at), at - from, true);
      } else {
        carry.push(chunk.subarray(from, at));
        const bytes = carryBytes + at - from;
        yield emit(Buffer.concat(carry, bytes).toString('utf8'), bytes, true);
        carry = [];
        carryBytes = 0;
      }
      from = at + 1;
    }
    if (from < chunk.length) {
      carry.push(chunk.subarray(from));
      carryBytes += chunk.length - from;
    }
  }
  if (carryBytes > 0) yield emit(Buffer.concat(carry, carryBytes).toString('utf8'), carryBytes, false);
}
