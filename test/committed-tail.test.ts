import { describe, expect, it } from 'vitest';
import { CommittedTail } from '../src/event-store/committed-tail.js';
import type { EventRow } from '../src/event-store/sqlite-stream-append.js';

const row = (position: number, dataChars = 10): EventRow => ({
  position,
  event_id: `id-${position}`,
  stream_name: 's',
  revision: position,
  type: 'Counted',
  data: 'x'.repeat(dataChars),
  metadata: '{}',
  recorded_at: 0,
});
const positions = (rows: readonly EventRow[]) => rows.map((held) => held.position);

describe("a process's committed tail", () => {
  it('answers a range only from the position after its start, up to a bound and a count', () => {
    const tail = new CommittedTail();
    tail.add([row(5), row(6), row(7), row(8)]);
    expect(positions(tail.after(4, Number.MAX_SAFE_INTEGER, 10))).toEqual([5, 6, 7, 8]);
    expect(positions(tail.after(6, Number.MAX_SAFE_INTEGER, 10))).toEqual([7, 8]);
    expect(positions(tail.after(4, 6, 10))).toEqual([5, 6]);
    expect(positions(tail.after(4, Number.MAX_SAFE_INTEGER, 3))).toEqual([5, 6, 7]);
    // Before its start or past its end: nothing (the file is read).
    expect(tail.after(3, Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
    expect(tail.after(8, Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
  });

  it('starts again where positions do not follow on (another process committed between), within a commit too', () => {
    const tail = new CommittedTail();
    tail.add([row(1), row(2)]);
    tail.add([row(5), row(6)]);
    expect(tail.after(0, Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
    expect(positions(tail.after(4, Number.MAX_SAFE_INTEGER, 10))).toEqual([5, 6]);
    tail.add([row(7), row(9)]);
    expect(tail.size).toBe(1);
    expect(positions(tail.after(8, Number.MAX_SAFE_INTEGER, 10))).toEqual([9]);
  });

  it('lets go of what every reader has read, and holds at most 2,000 rows or 8 MiB of data whatever the readers', () => {
    const tail = new CommittedTail();
    tail.add(Array.from({ length: 3_000 }, (_, index) => row(index + 1)));
    expect(tail.size).toBe(2_000);
    expect(positions(tail.after(1_000, Number.MAX_SAFE_INTEGER, 2))).toEqual([1_001, 1_002]);
    tail.readThrough(2_500);
    expect(tail.size).toBe(500);
    expect(positions(tail.after(2_500, Number.MAX_SAFE_INTEGER, 1))).toEqual([2_501]);
    const large = new CommittedTail();
    large.add(Array.from({ length: 20 }, (_, index) => row(index + 1, 1024 * 1024)));
    expect(large.size).toBe(8);
    tail.readThrough(3_000);
    expect(tail.size).toBe(0);
  });
});
