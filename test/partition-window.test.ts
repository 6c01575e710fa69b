import { describe, expect, it } from 'vitest';
import { PartitionWindow } from '../src/message-log/partition-window.js';

/** A window that handed offsets `from`..`to` (inclusive). */
function handed(from: number, to: number): PartitionWindow {
  const window = new PartitionWindow();
  for (let offset = from; offset <= to; offset++) window.hand(BigInt(offset));
  return window;
}

describe('the partition window (both message log adapters)', () => {
  it('commits only the contiguous finished prefix', () => {
    const window = handed(5, 8);
    expect(window.finish(6n)).toBe(false);
    expect(window.commitOffset).toBeUndefined();
    expect(window.finish(5n)).toBe(true);
    expect(window.commitOffset).toBe(7n);
    expect(window.unfinished).toBe(2);
  });

  it('commits at once when the commit needs no I/O, and not the same offset twice', () => {
    const window = handed(0, 2);
    const commits: bigint[] = [];
    const commitTo = (offset: bigint) => (commits.push(offset), true);
    window.finish(0n);
    void window.commit(commitTo);
    expect(commits).toEqual([1n]);
    void window.commit(commitTo);
    expect(commits).toEqual([1n]);
  });

  it('sends commits one after another, each with the prefix as it is at its turn', async () => {
    const window = handed(0, 3);
    const commits: bigint[] = [];
    let release: () => void = () => undefined;
    const first = new Promise<void>((resolve) => (release = resolve));
    const commitTo = async (offset: bigint) => {
      commits.push(offset);
      if (commits.length === 1) await first;
      return true;
    };
    window.finish(0n);
    const one = window.commit(commitTo);
    window.finish(1n);
    const two = window.commit(commitTo);
    window.finish(2n);
    const three = window.commit(commitTo);
    expect(commits).toEqual([1n]);
    release();
    await Promise.all([one, two, three]);
    // The second found the prefix at 3 and sent it; the third found it committed.
    expect(commits).toEqual([1n, 3n]);
  });

  it('sends the prefix again after a refused commit', async () => {
    const window = handed(0, 1);
    const answers = [false, true];
    const commits: bigint[] = [];
    const commitTo = async (offset: bigint) => (commits.push(offset), answers.shift()!);
    window.finish(0n);
    await window.commit(commitTo);
    await window.commit(commitTo);
    expect(commits).toEqual([1n, 1n]);
  });
});
