/** A binary min-heap under a comparison: push and pop in O(log n). */
export class BinaryHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly before: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const items = this.items;
    items.push(item);
    let index = items.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!this.before(items[index]!, items[parent]!)) break;
      swap(items, index, parent);
      index = parent;
    }
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    items[0] = last;
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      const right = left + 1;
      let smallest = index;
      if (left < items.length && this.before(items[left]!, items[smallest]!)) smallest = left;
      if (right < items.length && this.before(items[right]!, items[smallest]!)) smallest = right;
      if (smallest === index) break;
      swap(items, index, smallest);
      index = smallest;
    }
    return top;
  }
}

/** Swaps two items in place (a destructuring swap makes an array each time until the code is optimised; the scheduler's queue swaps for every batch line). */
function swap<T>(items: T[], a: number, b: number): void {
  const held = items[a]!;
  items[a] = items[b]!;
  items[b] = held;
}
