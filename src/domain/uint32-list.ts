/**
 * A list of unsigned 32-bit integers that grows as it is pushed to, in one typed array: 4 bytes an
 * entry. What validation keeps of each of a batch's up to 50,000 lines is held so; as arrays of
 * numbers (a small array per line, or an object per line) the same figures took about 11 MiB of
 * heap for 50,000 lines, which the process then kept as its peak.
 */
export class Uint32List {
  private values: Uint32Array;
  private size = 0;

  constructor(initialCapacity = 1_024) {
    this.values = new Uint32Array(Math.max(1, initialCapacity));
  }

  get length(): number {
    return this.size;
  }

  /** Refuses what a Uint32Array would store as something else (a fraction, a negative, 2^32 or more). */
  push(value: number): void {
    if (value >>> 0 !== value) throw new RangeError(`${value} is not an unsigned 32-bit integer`);
    if (this.size === this.values.length) {
      const grown = new Uint32Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.size++] = value;
  }

  /** The entry at index, which must be below length. */
  at(index: number): number {
    if (index >= this.size || index < 0) throw new RangeError(`index ${index} is outside the list's ${this.size} entries`);
    return this.values[index]!;
  }
}
