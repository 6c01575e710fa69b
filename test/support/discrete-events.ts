// A discrete-event loop on simulated time and a seeded random source, for deterministic runs of
// the scheduler and the concurrency limit against a model of an engine.

export class DiscreteEvents {
  now = 0;
  private seq = 0;
  private readonly events: Array<{ at: number; seq: number; run: () => void }> = [];

  at(time: number, run: () => void): void {
    const event = { at: Math.max(time, this.now), seq: this.seq++, run };
    // Binary insertion keeps the list ordered by time, then by scheduling order.
    let low = 0;
    let high = this.events.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      const other = this.events[middle]!;
      if (other.at < event.at || (other.at === event.at && other.seq < event.seq)) low = middle + 1;
      else high = middle;
    }
    this.events.splice(low, 0, event);
  }

  after(delay: number, run: () => void): void {
    this.at(this.now + delay, run);
  }

  runUntil(time: number): void {
    while (this.events.length > 0 && this.events[0]!.at <= time) {
      const event = this.events.shift()!;
      this.now = event.at;
      event.run();
    }
    this.now = time;
  }
}

/** mulberry32: a small seeded generator, uniform in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Jain's fairness index of allocations: 1 when equal, 1/n when one gets everything. */
export function jainIndex(allocations: readonly number[]): number {
  const sum = allocations.reduce((a, b) => a + b, 0);
  const squares = allocations.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? 1 : (sum * sum) / (allocations.length * squares);
}
