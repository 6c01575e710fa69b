import { describe, expect, it } from 'vitest';
import { RunsByKey } from '../src/platform/runs-by-key.js';

/** A task whose end the test chooses. */
function gate() {
  let open!: () => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('RunsByKey', () => {
  it('runs one task at a time per key, and keys apart from each other', async () => {
    const runs = new RunsByKey();
    const started: string[] = [];
    const gates = { a: gate(), b: gate() };
    const first = runs.run('a', async () => {
      started.push('a1');
      await gates.a.promise;
    });
    const other = runs.run('b', async () => {
      started.push('b1');
      await gates.b.promise;
    });
    await settle();
    expect(started).toEqual(['a1', 'b1']);
    gates.b.open();
    await other;
    expect(runs.size).toBe(1);
    gates.a.open();
    await first;
    expect(runs.size).toBe(0);
  });

  it('queues one run after the one under way, which every later call joins', async () => {
    const runs = new RunsByKey();
    const held = gate();
    let count = 0;
    let running = 0;
    let overlapped = false;
    const task = async () => {
      running += 1;
      if (running > 1) overlapped = true;
      count += 1;
      if (count === 1) await held.promise;
      running -= 1;
    };
    const first = runs.run('k', task);
    await settle();
    const second = runs.run('k', task);
    const third = runs.run('k', task);
    expect(third).toBe(second);
    await settle();
    expect(count).toBe(1);
    held.open();
    await Promise.all([first, second, third]);
    expect(count).toBe(2);
    expect(overlapped).toBe(false);
    expect(runs.size).toBe(0);
    // A call after everything ended runs at once.
    await runs.run('k', task);
    expect(count).toBe(3);
  });

  it('gives a failing run its error, and still runs the one queued after it', async () => {
    const runs = new RunsByKey();
    const held = gate();
    const first = runs.run('k', () => held.promise);
    let queuedRan = false;
    const second = runs.run('k', async () => {
      queuedRan = true;
    });
    held.fail(new Error('disk gone'));
    await expect(first).rejects.toThrow('disk gone');
    await second;
    expect(queuedRan).toBe(true);
    expect(runs.size).toBe(0);
  });
});
