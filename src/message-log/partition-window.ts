/**
 * Commits an offset; says whether it is now committed (a refusal is `false`, never a throw). A
 * commit that needs no I/O answers at once.
 */
export type CommitOffset = (offset: bigint) => boolean | Promise<boolean>;

/**
 * The messages of one partition a consumer holds: handed to the handler in offset order, finished
 * in any order. Only the contiguous finished prefix may be committed, so a member that dies
 * redelivers every message not known to be finished; commits go out one after another, so a
 * later prefix never lands first. Both message log adapters keep one per partition a member
 * holds. Offsets are Kafka's (64-bit, possibly with gaps), kept as bigint.
 */
export class PartitionWindow {
  /** Handed messages not yet part of the finished prefix, in offset order. */
  private readonly pending: Array<{ readonly offset: bigint; finished: boolean }> = [];
  private unfinishedCount = 0;
  private lastHanded: bigint | undefined;
  private prefixEnd: bigint | undefined;
  /** The offset committed last. */
  private committed: bigint | undefined;
  /** The commit under way, if one is: the next waits for it. */
  private committing: Promise<void> | undefined;
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

  /**
   * Commits the finished prefix through `commitTo`, unless it is the offset committed last: at
   * once when no commit is under way (one that needs no I/O is done when this returns), else once
   * the one under way is done, with the prefix as it is then. A refused commit leaves the last one
   * standing, and the next commit sends the prefix again.
   */
  commit(commitTo: CommitOffset): Promise<void> {
    const previous = this.committing;
    const step = previous ? previous.then(() => this.commitPrefix(commitTo)) : this.commitPrefix(commitTo);
    if (!step) return Promise.resolve();
    const committing: Promise<void> = step.finally(() => {
      if (this.committing === committing) this.committing = undefined;
    });
    this.committing = committing;
    return committing;
  }

  /** Commits the prefix if it moved since the last commit; a promise only while `commitTo` works on it. */
  private commitPrefix(commitTo: CommitOffset): Promise<void> | undefined {
    const offset = this.prefixEnd;
    if (offset === undefined || offset === this.committed) return undefined;
    const answer = commitTo(offset);
    if (typeof answer === 'boolean') {
      if (answer) this.committed = offset;
      return undefined;
    }
    return answer.then((done) => {
      if (done) this.committed = offset;
    });
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
