import { describe, expect, it } from 'vitest';
import { RenderedLines } from '../processors/batch/rendered-lines.js';

describe("a chunk's rendered lines held as bytes", () => {
  it('puts lines given in any order back in place order, output and error apart, skipping places without a line', () => {
    const rendered = new RenderedLines();
    rendered.set(3, false, 'd\n');
    rendered.set(0, false, 'a\n');
    rendered.set(4, true, 'e failed\n');
    rendered.set(1, true, 'b failed\n');
    // Place 2 is a blank input line: it has no outcome.
    expect(rendered.lines).toBe(4);
    const parts = rendered.parts();
    expect(parts.output.toString('utf8')).toBe('a\nd\n');
    expect(parts.error.toString('utf8')).toBe('b failed\ne failed\n');
  });

  it('keeps the bytes of text in every script across many blocks, a line longer than a block among them', () => {
    const rendered = new RenderedLines();
    const lines: string[] = [];
    // About 600 KiB of lines with two-, three- and four-byte characters: many blocks' worth.
    for (let place = 0; place < 2000; place++) lines.push(`{"line":${place},"text":"${'é€😀'.repeat(40)}"}\n`);
    // An embeddings answer can be longer than a block on its own.
    lines[1000] = `{"line":1000,"text":"${'€'.repeat(40_000)}"}\n`;
    for (let place = lines.length - 1; place >= 0; place--) rendered.set(place, false, lines[place]!);
    const { output, error } = rendered.parts();
    expect(output.equals(Buffer.from(lines.join('')))).toBe(true);
    expect(error.length).toBe(0);
  });

  it('holds a chunk of long lines in blocks they fill, not a block a line', () => {
    const rendered = new RenderedLines();
    // An embeddings output line: over 8 KB of digits, which at their worst (three bytes a character) would fill a block alone.
    const line = `{"embedding":[${Array.from({ length: 440 }, (_, index) => (index / 7).toFixed(15)).join(',')}]}\n`;
    expect(line.length).toBeGreaterThan(32 * 1024 / 4);
    for (let place = 0; place < 200; place++) rendered.set(place, false, line);
    const bytes = 200 * line.length;
    expect(rendered.parts().output.length).toBe(bytes);
    // Three lines to a 32 KiB block (a block a line held four times the lines).
    expect(rendered.heldBytes).toBeLessThan(bytes * 1.4);
  });

  it('counts a place given twice once, with its latest line', () => {
    const rendered = new RenderedLines();
    rendered.set(0, false, 'first\n');
    rendered.set(0, true, 'second\n');
    expect(rendered.lines).toBe(1);
    expect(rendered.parts().output.length).toBe(0);
    expect(rendered.parts().error.toString('utf8')).toBe('second\n');
  });
});
