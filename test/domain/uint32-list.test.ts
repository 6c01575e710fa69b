import { describe, expect, it } from 'vitest';
import { Uint32List } from '../../src/domain/uint32-list.js';

describe('Uint32List', () => {
  it('keeps every value pushed, in order, as it grows past its capacity', () => {
    const list = new Uint32List(2);
    const values = Array.from({ length: 1_000 }, (_, index) => (index * 2_654_435_761) >>> 0);
    for (const value of values) list.push(value);
    expect(list.length).toBe(values.length);
    expect(Array.from({ length: list.length }, (_, index) => list.at(index))).toEqual(values);
  });

  it('holds the whole unsigned 32-bit range', () => {
    const list = new Uint32List(1);
    list.push(0);
    list.push(2 ** 32 - 1);
    expect([list.at(0), list.at(1)]).toEqual([0, 2 ** 32 - 1]);
  });

  it('refuses a value it could not hold as given, rather than storing it wrapped or truncated', () => {
    const list = new Uint32List();
    for (const value of [-1, 2 ** 32, 1.5, Number.NaN]) expect(() => list.push(value)).toThrow(/not an unsigned 32-bit integer/);
    expect(list.length).toBe(0);
  });

  it('refuses an index outside what was pushed, rather than reading the unused capacity as 0', () => {
    const list = new Uint32List(8);
    list.push(7);
    expect(() => list.at(1)).toThrow(/outside the list's 1 entries/);
    expect(() => list.at(-1)).toThrow(RangeError);
  });
});
