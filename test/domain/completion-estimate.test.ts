import { describe, expect, it } from 'vitest';
import { estimateCompletion, keepRateWindow } from '../../src/domain/completion-estimate.js';

describe('estimating when a batch completes at its current rate', () => {
  const base = { in_progress_at: 1000, lines_total: 100 };

  it('uses the recent window when it saw enough lines settle', () => {
    // 10 lines in the last 100 s: 0.1 lines/s, 60 left → 600 s more.
    const estimate = estimateCompletion({ ...base, now: 2000, lines_done: 40, window: [{ at: 1900, done: 30 }] });
    expect(estimate).toEqual({ at: 2000, estimated_completion_at: 2600, lines_done: 40, lines_total: 100, lines_per_second: 0.1 });
  });

  it('falls back to the rate since the batch went in progress when the window saw too few lines (a stall drags it down)', () => {
    // 1 line in the window; 40 lines in 1000 s since in progress: 0.04 lines/s, 60 left → 1500 s more.
    const estimate = estimateCompletion({ ...base, now: 2000, lines_done: 40, window: [{ at: 1900, done: 39 }] });
    expect(estimate).toMatchObject({ estimated_completion_at: 3500, lines_per_second: 0.04 });
    expect(estimateCompletion({ ...base, now: 3000, lines_done: 40, window: [] })).toMatchObject({ estimated_completion_at: 6000, lines_per_second: 0.02 });
  });

  it('rounds the estimate up to a whole second', () => {
    expect(estimateCompletion({ ...base, now: 1003, lines_done: 2, window: [] })?.estimated_completion_at).toBe(1003 + Math.ceil(98 * 1.5));
  });

  it('gives no estimate with too little progress, no time elapsed, or nothing left', () => {
    expect(estimateCompletion({ ...base, now: 2000, lines_done: 1, window: [] })).toBeUndefined();
    expect(estimateCompletion({ ...base, now: 1000, lines_done: 50, window: [] })).toBeUndefined();
    expect(estimateCompletion({ ...base, now: 2000, lines_done: 100, window: [] })).toBeUndefined();
    expect(estimateCompletion({ ...base, now: 2000, lines_done: 40, window: [{ at: 2000, done: 30 }] })).toMatchObject({ lines_per_second: 0.04 });
  });

  it('keeps the samples inside the window and the newest one before it as its anchor', () => {
    const samples = [{ at: 100, done: 1 }, { at: 200, done: 2 }, { at: 300, done: 3 }, { at: 900, done: 9 }];
    expect(keepRateWindow(samples, 1000, 600)).toEqual([{ at: 300, done: 3 }, { at: 900, done: 9 }]);
    expect(keepRateWindow(samples, 1000, 50)).toEqual([{ at: 900, done: 9 }]);
    expect(keepRateWindow([], 1000, 600)).toEqual([]);
  });
});
