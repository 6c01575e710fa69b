import { describe, expect, it, vi } from 'vitest';
import { backoffDelay, retryUntil } from '../src/platform/retry.js';

describe('backoff', () => {
  it('doubles from the first delay up to the cap', () => {
    const delays = [1, 2, 3, 4, 5, 6].map((failures) => backoffDelay({ firstMs: 500, maxMs: 10_000 }, failures));
    expect(delays).toEqual([500, 1000, 2000, 4000, 8000, 10_000]);
    expect(backoffDelay({ firstMs: 1000 }, 4)).toBe(8000);
  });

  it('with jitter, draws each delay from the upper half of the capped one', () => {
    expect(backoffDelay({ firstMs: 500, maxMs: 10_000, jitter: true }, 2, () => 0)).toBe(500);
    expect(backoffDelay({ firstMs: 500, maxMs: 10_000, jitter: true }, 2, () => 0.999)).toBeCloseTo(999.5);
    expect(backoffDelay({ firstMs: 500, maxMs: 10_000, jitter: true }, 10, () => 0)).toBe(5000);
  });
});

describe('retryUntil', () => {
  it('tries again after each failure, telling of each, until the attempt succeeds', async () => {
    const failures: Array<{ attempt: number; retryInMs: number }> = [];
    let tries = 0;
    const succeeded = await retryUntil(
      async () => {
        if (++tries < 3) throw new Error(`no ${tries}`);
      },
      { backoff: { firstMs: 1, maxMs: 2 }, onFailure: (_error, failure) => failures.push(failure) },
    );
    expect(succeeded).toBe(true);
    expect(failures).toEqual([
      { attempt: 1, retryInMs: 1 },
      { attempt: 2, retryInMs: 2 },
    ]);
  });

  it('makes no attempt once stopped, and none after its deadline, whose wait it never passes', async () => {
    let tries = 0;
    const fail = async () => {
      tries++;
      throw new Error('away');
    };
    expect(await retryUntil(fail, { backoff: { firstMs: 1 }, stopped: () => true })).toBe(false);
    expect(tries).toBe(0);

    const waits: number[] = [];
    const startedAt = Date.now();
    const reached = await retryUntil(fail, { backoff: { firstMs: 10_000 }, deadline: startedAt + 50, onFailure: (_error, { retryInMs }) => waits.push(retryInMs) });
    expect(reached).toBe(false);
    expect(tries).toBe(1);
    expect(waits[0]).toBeLessThanOrEqual(50);
    expect(Date.now() - startedAt).toBeLessThan(5_000);
  });

  it('ends once a wait reached its deadline, even when the clock read after that wait is a millisecond short of it', async () => {
    // A timer may fire a millisecond before its time; a clock that stands just short of the
    // deadline plays that moment for ever.
    const now = Date.now();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(now);
    try {
      let tries = 0;
      const reached = await retryUntil(
        async () => {
          tries++;
          throw new Error('away');
        },
        { backoff: { firstMs: 10_000 }, deadline: now + 2 },
      );
      expect(reached).toBe(false);
      expect(tries).toBe(1);
    } finally {
      clock.mockRestore();
    }
  });
});
