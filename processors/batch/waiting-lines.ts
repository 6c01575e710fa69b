import type { LineOutcome } from '../../src/domain/line-outcome.js';

/** Hears how one batch line sent to its engine went (BatchLineSender.send): `settled` or `failed` once. */
export interface LineListener {
  /** The engine gave the line a slot, or it will go out without one: it no longer waits. May come more than once. */
  admitted(): void;
  /** The line's outcome; undefined when the process stopped before it was sent. */
  settled(outcome: LineOutcome | undefined): void;
  /** The line could not be sent at all (not an engine's failure: those are outcomes). */
  failed(error: unknown): void;
}

/**
 * A chunk's lines sent to the engine: how many wait for a slot (room() holds the reader back while
 * `limit` do), how many have no outcome yet, and where their outcomes go. Each line sent has a
 * listener of its own, one small object, rather than a promise and its continuations: what a line
 * holds while it waits and runs outlives young collections (bench/FINDINGS.md, 2026-12-02, morning).
 */
export class WaitingLines {
  private waiting = 0;
  private unsettled = 0;
  private wake: (() => void) | undefined;
  private whenSettled: (() => void) | undefined;
  /** Lines left without an outcome because the process stopped before they were sent. */
  leftOver = 0;
  /** The first line that failed outright (it fails the chunk once the lines sent are over). */
  failure: { error: unknown } | undefined;

  constructor(
    private readonly limit: number,
    private readonly record: (outcome: LineOutcome) => void,
  ) {}

  /** Undefined where there is room now (every batch line asks: no promise made then); else resolves once there is. */
  room(): Promise<void> | undefined {
    return this.waiting >= this.limit ? this.untilRoom() : undefined;
  }

  private async untilRoom(): Promise<void> {
    while (this.waiting >= this.limit) await new Promise<void>((resolve) => (this.wake = resolve));
  }

  /** A line goes to the engine: its listener. */
  enter(): LineListener {
    this.waiting += 1;
    this.unsettled += 1;
    return new SentLine(this);
  }

  /** Resolves once every line entered has settled or failed. */
  allSettled(): Promise<void> {
    if (this.unsettled === 0) return Promise.resolve();
    return new Promise<void>((resolve) => (this.whenSettled = resolve));
  }

  /** @internal A line left the queue (once). */
  left(): void {
    this.waiting -= 1;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** @internal A line's outcome, or its failure; `outcome` undefined with no error: left over. */
  ended(outcome: LineOutcome | undefined, error?: { error: unknown }): void {
    try {
      if (error) this.failure ??= error;
      else if (outcome) this.record(outcome);
      else this.leftOver += 1;
    } catch (thrown) {
      this.failure ??= { error: thrown };
    } finally {
      this.unsettled -= 1;
      if (this.unsettled === 0) {
        const settled = this.whenSettled;
        this.whenSettled = undefined;
        settled?.();
      }
    }
  }
}

/** One line sent: leaves the queue once, and ends once. */
class SentLine implements LineListener {
  private waiting = true;
  private ended = false;

  constructor(private readonly lines: WaitingLines) {}

  admitted(): void {
    if (!this.waiting) return;
    this.waiting = false;
    this.lines.left();
  }

  settled(outcome: LineOutcome | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.admitted();
    this.lines.ended(outcome);
  }

  failed(error: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.admitted();
    this.lines.ended(undefined, { error });
  }
}
