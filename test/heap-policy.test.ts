import { execFileSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { heapPolicyParts } from '../src/process/heap-policy.js';

const MIB = 1024 * 1024;

/**
 * The largest semi-space a fresh node process reached under allocation that makes V8 grow its
 * young generation (objects that survive a few young collections, then die), with the policy
 * held at `semiSpaceMiB` or without it.
 */
function largestSemiSpace(semiSpaceMiB: number | undefined): number {
  const policy = pathToFileURL(new URL('../src/process/heap-policy.ts', import.meta.url).pathname).href;
  const script = `
    const { applyHeapPolicy, semiSpaceBytes } = await import(${JSON.stringify(policy)});
    ${semiSpaceMiB === undefined ? '' : `applyHeapPolicy({ semiSpaceMiB: ${semiSpaceMiB}, oldGrowthPercent: 50 }, []);`}
    const kept = [];
    let largest = 0;
    for (let round = 0; round < 600; round++) {
      for (let index = 0; index < 5000; index++) kept.push({ text: 'line ' + round + '/' + index, numbers: [round, index] });
      if (kept.length > 60000) kept.splice(0, 30000);
      await new Promise((resolve) => setImmediate(resolve));
      largest = Math.max(largest, semiSpaceBytes());
    }
    process.stdout.write(String(largest));
  `;
  return Number(execFileSync(process.execPath, ['--input-type=module', '--no-warnings', '-e', script], { encoding: 'utf8' }));
}

describe('the heap policy', () => {
  it('leaves to node the parts of the heap it was given flags for', () => {
    expect(heapPolicyParts([])).toEqual({ youngGeneration: true, oldGeneration: true });
    expect(heapPolicyParts(['--max-old-space-size=64', '--import', 'x.js'])).toEqual({ youngGeneration: true, oldGeneration: true });
    expect(heapPolicyParts(['--max-semi-space-size=16'])).toEqual({ youngGeneration: false, oldGeneration: true });
    expect(heapPolicyParts(['--semi_space_growth_factor', '1', '--heap-growing-percent=80'])).toEqual({ youngGeneration: false, oldGeneration: false });
  });

  it('keeps the young generation near its semi-space under allocation that grows it to 64 MiB without it', () => {
    expect(largestSemiSpace(undefined)).toBeGreaterThanOrEqual(32 * MIB);
    // Held a collection or two late at worst (see applyHeapPolicy), far from V8's own ceiling.
    expect(largestSemiSpace(4)).toBeLessThan(32 * MIB);
  });
});
