import { describe, expect, it } from 'vitest';
import { PhysicalLineSplitter, physicalLines } from '../processors/batch/jsonl-lines.js';

/** The bytes handed over in pieces cut at the given offsets, as a stream's chunks would be. */
async function* inPieces(bytes: Buffer, cuts: readonly number[]): AsyncGenerator<Buffer> {
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    yield bytes.subarray(from, cut);
    from = cut;
  }
}

async function linesOf(bytes: Buffer, cuts: readonly number[], firstNumber?: number, firstOffset?: number) {
  const lines = [];
  for await (const line of physicalLines(inPieces(bytes, cuts), firstNumber, firstOffset)) lines.push(line);
  return lines;
}

describe('physical lines of a byte stream', () => {
  // Two-byte and four-byte characters, a CRLF line, a blank line and a last line without its newline.
  const text = '{"a":"é"}\r\n\n{"b":"𝄞 ü"}\nlast';
  const bytes = Buffer.from(text, 'utf8');
  const expected = (() => {
    const lines = [];
    let start = 0;
    let number = 1;
    for (const raw of text.split('\n')) {
      const length = Buffer.byteLength(raw, 'utf8');
      const newline = start + length < bytes.length;
      lines.push({ number, text: raw.endsWith('\r') ? raw.slice(0, -1) : raw, start, end: start + length + (newline ? 1 : 0) });
      start += length + 1;
      number += 1;
    }
    return lines;
  })();

  it('gives each line its text and exact byte range, wherever the chunks are cut (inside characters and line endings too)', async () => {
    expect(await linesOf(bytes, [])).toEqual(expected);
    for (let cut = 1; cut < bytes.length; cut++) expect(await linesOf(bytes, [cut])).toEqual(expected);
    // Every byte its own chunk: each line is put together from pieces.
    expect(await linesOf(bytes, Array.from({ length: bytes.length - 1 }, (_, at) => at + 1))).toEqual(expected);
  });

  it('numbers and places lines from where a chunk of the file starts', async () => {
    const lines = await linesOf(Buffer.from('x\ny\n'), [1], 41, 1000);
    expect(lines).toEqual([
      { number: 41, text: 'x', start: 1000, end: 1002 },
      { number: 42, text: 'y', start: 1002, end: 1004 },
    ]);
  });

  it('gives a line when asked, and is handed the next chunk only once the last has no whole line left', () => {
    const lines = new PhysicalLineSplitter(7, 100);
    lines.push(Buffer.from('a\nb'));
    expect(() => lines.push(Buffer.from('x'))).toThrow(/before the last one was read through/);
    expect(lines.next()).toEqual({ number: 7, text: 'a', start: 100, end: 102 });
    expect(() => lines.finish()).toThrow(/before the last chunk was read through/);
    expect(lines.next()).toBeUndefined();
    lines.push(Buffer.from('c\n'));
    expect(lines.next()).toEqual({ number: 8, text: 'bc', start: 102, end: 105 });
    expect(lines.next()).toBeUndefined();
    expect(lines.finish()).toBeUndefined();
  });
});
