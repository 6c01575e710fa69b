import { describe, expect, it } from 'vitest';
import { BinaryHeap } from '../src/platform/binary-heap.js';

describe('binary heap', () => {
  it('pops in the order of its comparison, ties in push order where the comparison says so, whatever the pushes and pops between', () => {
    // A fixed pseudo-random sequence: the same run every time.
    let seed = 12345;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const heap = new BinaryHeap<{ key: number; seq: number }>((a, b) => a.key < b.key || (a.key === b.key && a.seq < b.seq));
    const model: Array<{ key: number; seq: number }> = [];
    let seq = 0;
    for (let step = 0; step < 5_000; step++) {
      if (next() < 0.6 || model.length === 0) {
        const item = { key: Math.floor(next() * 50), seq: seq++ };
        heap.push(item);
        model.push(item);
      } else {
        model.sort((a, b) => a.key - b.key || a.seq - b.seq);
        expect(heap.pop()).toBe(model.shift());
      }
      expect(heap.size).toBe(model.length);
    }
    model.sort((a, b) => a.key - b.key || a.seq - b.seq);
    const rest = [];
    while (heap.size > 0) rest.push(heap.pop());
    expect(rest).toEqual(model);
    expect(heap.pop()).toBeUndefined();
  });
});
