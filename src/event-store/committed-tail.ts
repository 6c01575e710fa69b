import type { EventRow } from './sqlite-stream-append.js';

/** At most this many rows are kept, whatever the readers: a reader that stalls reads the file again. */
const MAX_ROWS = 2_000;
/** And at most this much event data (an embeddings line's outcome is about 8 KB). */
const MAX_DATA_CHARS = 8 * 1024 * 1024;

/**
 * The rows this process committed last, as it inserted them, for its own readers (the projector,
 * the relay), which would otherwise read each event back from the file just after writing it:
 * a row's strings allocated again and kept until the page is handed on, which made the reads back
 * about a tenth of what a batch line's main-thread objects left to the old generation.
 *
 * The rows held have contiguous positions: a commit whose first position does not follow the last
 * row held (another process committed between) starts the tail again. So a range that begins in
 * the tail holds every event of the log at those positions, whoever else writes to the file.
 */
export class CommittedTail {
  private rows: EventRow[] = [];
  /** The index of the first row still held (rows before it are dropped in place, then compacted). */
  private start = 0;
  private dataChars = 0;

  /** A commit's rows, in position order, once the commit stands. */
  add(rows: readonly EventRow[]): void {
    for (const row of rows) {
      const last = this.rows.length > this.start ? this.rows[this.rows.length - 1]! : undefined;
      if (last !== undefined && row.position !== last.position + 1) this.clear();
      this.rows.push(row);
      this.dataChars += row.data.length;
    }
    while (this.rows.length - this.start > MAX_ROWS || (this.dataChars > MAX_DATA_CHARS && this.rows.length - this.start > 1)) this.dropFirst();
    this.compact();
  }

  /**
   * The rows after position `after`, up to `through` and `maxCount` of them, where the tail holds
   * the position that follows `after`; empty where it does not (read the file).
   */
  after(after: number, through: number, maxCount: number): EventRow[] {
    const first = this.rows[this.start];
    if (first === undefined || after + 1 < first.position) return [];
    const from = this.start + (after + 1 - first.position);
    if (from >= this.rows.length) return [];
    const rows: EventRow[] = [];
    for (let index = from; index < this.rows.length && rows.length < maxCount; index++) {
      const row = this.rows[index]!;
      if (row.position > through) break;
      rows.push(row);
    }
    return rows;
  }

  /** Every reader has read through `position`: the rows up to it are not needed any longer. */
  readThrough(position: number): void {
    while (this.rows.length > this.start && this.rows[this.start]!.position <= position) this.dropFirst();
    this.compact();
  }

  /** How many rows are held (for tests). */
  get size(): number {
    return this.rows.length - this.start;
  }

  private dropFirst(): void {
    this.dataChars -= this.rows[this.start]!.data.length;
    this.start++;
  }

  private clear(): void {
    this.rows = [];
    this.start = 0;
    this.dataChars = 0;
  }

  /** Drops the array's dead front once it is most of the array (a shift per row would copy the rest each time). */
  private compact(): void {
    if (this.start === this.rows.length) this.clear();
    else if (this.start > 256 && this.start * 2 > this.rows.length) {
      this.rows = this.rows.slice(this.start);
      this.start = 0;
    }
  }
}
