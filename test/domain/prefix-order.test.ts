import { describe, expect, it } from 'vitest';
import { MIN_SHARED_PREFIX_CHARS, PrefixSignatureTable, prefixSignature } from '../../src/domain/prefix-order.js';

const system = (name: string) => `${name}: ${'you answer questions about this long shared document. '.repeat(10)}`;
const chat = (instructions: string | undefined, question: string) => ({
  model: 'm',
  messages: [...(instructions === undefined ? [] : [{ role: 'system', content: instructions }]), { role: 'user', content: question }],
});

/** The order of a file's lines, given each line's chat body. */
function orderOf(bodies: Record<string, unknown>[]): number[] | undefined {
  const table = new PrefixSignatureTable();
  for (const body of bodies) table.add(prefixSignature('/v1/chat/completions', body));
  return table.order();
}

describe('prefix signature', () => {
  it('level 0 is the instructions: shared by lines with the same system prompt, whatever follows', () => {
    const a = prefixSignature('/v1/chat/completions', chat(system('A'), 'first question'));
    const b = prefixSignature('/v1/chat/completions', chat(system('A'), 'another question'));
    const c = prefixSignature('/v1/chat/completions', chat(system('C'), 'first question'));
    expect(a[0]).toBeDefined();
    expect(a[0]).toBe(b[0]);
    expect(a[0]).not.toBe(c[0]);
    // The rendered prompt is shared down to the first depth only where the instructions reach that far.
    expect(a[1]).not.toBe(b[1]);
  });

  it('a prefix too short to be worth moving lines for has no signature', () => {
    const short = prefixSignature('/v1/chat/completions', chat('Be brief.', 'What is 2 + 2?'));
    expect('Be brief.'.length).toBeLessThan(MIN_SHARED_PREFIX_CHARS);
    expect(short.every((level) => level === undefined)).toBe(true);
  });

  it('completions share every level when their prompts are equal; embeddings have no signature', () => {
    const document = 'the same document '.repeat(100);
    const one = prefixSignature('/v1/completions', { prompt: `${document} question one` });
    const two = prefixSignature('/v1/completions', { prompt: `${document} question two` });
    expect(one[1]).toBe(two[1]);
    expect(one[one.length - 1]).not.toBe(two[two.length - 1]);
    expect(prefixSignature('/v1/embeddings', { input: document })).toEqual([]);
  });

  it('responses: the instructions are level 0', () => {
    const one = prefixSignature('/v1/responses', { instructions: system('R'), input: 'one' });
    const two = prefixSignature('/v1/responses', { instructions: system('R'), input: 'two' });
    expect(one[0]).toBeDefined();
    expect(one[0]).toBe(two[0]);
  });
});

describe('prefix-aware order', () => {
  it('groups lines by shared instructions, each group where its first line stands, file order within', () => {
    const prompts = ['A', 'B', 'A', 'C', 'B', 'A', 'C'];
    const order = orderOf(prompts.map((name, index) => chat(system(name), `question ${index}`)));
    expect(order).toEqual([0, 2, 5, 1, 4, 3, 6]);
  });

  it('leaves lines with nothing shared in place, and moves only the group members', () => {
    const bodies = [chat(undefined, 'short one'), chat(system('A'), 'q1'), chat(undefined, 'short two'), chat(system('A'), 'q2'), chat(undefined, 'short three')];
    expect(orderOf(bodies)).toEqual([0, 1, 3, 2, 4]);
  });

  it('file order already grouped, or nothing shared: no order (the input file is run as it is)', () => {
    expect(orderOf([chat(system('A'), 'q1'), chat(system('A'), 'q2'), chat(system('B'), 'q3')])).toBeUndefined();
    expect(orderOf(Array.from({ length: 20 }, (_, index) => chat(undefined, `question ${index}`)))).toBeUndefined();
  });

  it('within a group, lines sharing a deeper prefix run together', () => {
    const document = (name: string) => `${system('A')} ${name.repeat(5_000)}`;
    // Same instructions; the user turn carries one of two long documents.
    const bodies = ['x', 'y', 'x', 'y'].map((name, index) => ({ messages: [{ role: 'system', content: system('A') }, { role: 'user', content: `${document(name)} question ${index}` }] }));
    expect(orderOf(bodies)).toEqual([0, 2, 1, 3]);
  });

  it('is a permutation: every line once', () => {
    const names = Array.from({ length: 500 }, (_, index) => String.fromCharCode(65 + ((index * 7919) % 13)));
    const order = orderOf(names.map((name, index) => chat(system(name), `q${index}`)))!;
    expect([...order].sort((a, b) => a - b)).toEqual(names.map((_, index) => index));
    // 13 groups, each contiguous.
    const runs = order.filter((line, position) => position === 0 || names[line] !== names[order[position - 1]!]).length;
    expect(runs).toBe(13);
  });
});
