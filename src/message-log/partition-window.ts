/**
 * The messages of one partition a consumer holds: handed to the handler in offset order, finished
 * in any order. Only the contiguous finished prefix may be committed, so a member that dies
 * redelivers every message not known to be finished. Offsets are Kafka's (64-bit, possibly with
 * gaps), kept as bigint.
 */
export class PartitionWindow {
  /** Handed messages not yet part of the finished prefix, in offset order. */
  private readonly pending: Array<{ readonly offset: bigint; finished: boolean }> = [];
  private unfinishedCount = 0;
  private lastHanded: bigint | undefined;
  private prefixEnd: bigint | undefined;
  private woken: () => void = () => undefined;
  private change = this.nextChange();

  /** Handed messages that have not finished (running or waiting to be retried). */
  get unfinished(): number {
    return this.unfinishedCount;
  }

  /** Whether a message at this offset was handed already (a fetch after a rebalance repeats it). */
  handed(offset: bigint): boolean {
    return this.lastHanded !== undefined && offset <= this.lastHanded;
  }

  hand(offset: bigint): void {
    if (this.handed(offset)) throw new Error(`offset ${offset} was handed already`);
    this.pending.push({ offset, finished: false });
    this.unfinishedCount++;
    this.lastHanded = offset;
  }

  /** Marks a handed message finished; true if the finished prefix grew. */
  finish(offset: bigint): boolean {
    const entry = this.pending.find((candidate) => candidate.offset === offset && !candidate.finished);
    if (!entry) return false;
    entry.finished = true;
    this.unfinishedCount--;
    let grew = false;
    while (this.pending[0]?.finished) {
      this.prefixEnd = this.pending.shift()!.offset + 1n;
      grew = true;
    }
    this.wake();
    return grew;
  }

  /** The offset to commit (the one after the finished prefix), if anything finished. */
  get commitOffset(): bigint | undefined {
    return this.prefixEnd;
  }

  /** Resolves at the next change: a message finishing, or `wake()`. */
  changed(): Promise<void> {
    return this.change;
  }

  wake(): void {
    const woken = this.woken;
    this.change = this.nextChange();
    woken();
  }

  private nextChange(): Promise<void> {
    return new Promise<void>((resolve) => (this.woken = resolve));
  }
}
