import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD, SEMI_SPACE_MIB, startOverWith, withSemiSpace } from '../src/process/process-limits.js';
import { startSpoolCli, stop, waitForReady } from './support/processes.js';

const SEMI_SPACE_FLAG = `--max-semi-space-size=${SEMI_SPACE_MIB}`;
const GLIBC = { MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_: MALLOC_MMAP_THRESHOLD };

describe('the limits long-running processes start under', () => {
  it('serve, processor and relay start over with all three, unless the operator set them; other commands never', () => {
    const both = { env: GLIBC, nodeFlags: [SEMI_SPACE_FLAG] };
    expect(startOverWith([], {}, [], 'linux', true)).toEqual(both);
    expect(startOverWith(['serve', '--all'], {}, [], 'linux', true)).toEqual(both);
    expect(startOverWith(['processor', 'inference'], {}, ['--enable-source-maps'], 'linux', true)).toEqual(both);
    expect(startOverWith(['relay'], {}, [], 'linux', true)).toEqual(both);

    expect(startOverWith(['replay'], {}, [], 'linux', true)).toBeUndefined();
    expect(startOverWith(['checkpoint', 'create'], {}, [], 'linux', true)).toBeUndefined();
    expect(startOverWith(['help'], {}, [], 'linux', true)).toBeUndefined();
  });

  it("an operator's value stands, each on its own: the arena limit, the mmap threshold, and any young-generation flag", () => {
    expect(startOverWith(['serve'], { MALLOC_ARENA_MAX: '8' }, [], 'linux', true)).toEqual({ env: { MALLOC_MMAP_THRESHOLD_: MALLOC_MMAP_THRESHOLD }, nodeFlags: [SEMI_SPACE_FLAG] });
    expect(startOverWith(['serve'], { MALLOC_MMAP_THRESHOLD_: '1048576' }, [], 'linux', true)).toEqual({ env: { MALLOC_ARENA_MAX }, nodeFlags: [SEMI_SPACE_FLAG] });
    expect(startOverWith(['serve'], { MALLOC_ARENA_MAX: '8', MALLOC_MMAP_THRESHOLD_: '1048576' }, [], 'linux', true)).toEqual({ env: {}, nodeFlags: [SEMI_SPACE_FLAG] });
    expect(startOverWith(['serve'], {}, ['--max-semi-space-size=16'], 'linux', true)).toEqual({ env: GLIBC, nodeFlags: [] });
    expect(startOverWith(['serve'], {}, ['--semi_space_growth_factor=1'], 'linux', true)).toEqual({ env: GLIBC, nodeFlags: [] });
    // After the exec all three are there, so it happens once.
    expect(startOverWith(['serve'], GLIBC, [SEMI_SPACE_FLAG], 'linux', true)).toBeUndefined();
  });

  it('no glibc settings off Linux; no start-over without process.execve or under a parent\'s IPC channel', () => {
    expect(startOverWith(['serve'], {}, [], 'darwin', true)).toEqual({ env: {}, nodeFlags: [SEMI_SPACE_FLAG] });
    expect(startOverWith(['serve'], {}, [SEMI_SPACE_FLAG], 'darwin', true)).toBeUndefined();
    expect(startOverWith(['serve'], {}, [], 'linux', false)).toBeUndefined();
    // A parent's IPC channel would not survive the exec.
    expect(startOverWith(['serve'], { NODE_CHANNEL_FD: '3' }, [], 'linux', true)).toBeUndefined();
  });

  const work = mkdtempSync(join(tmpdir(), 'spool-limits-'));
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it.runIf(process.platform === 'linux' && typeof process.execve === 'function')(
    "`spool serve` runs under them in the process it was started as, and an operator's values stand",
    async () => {
      const cases: Array<{ given: Record<string, string>; arenas: string; threshold: string; flag: string | undefined }> = [
        { given: {}, arenas: MALLOC_ARENA_MAX, threshold: MALLOC_MMAP_THRESHOLD, flag: SEMI_SPACE_FLAG },
        // node accepts a quoted option in NODE_OPTIONS; it is the operator's all the same.
        { given: { MALLOC_ARENA_MAX: '4', MALLOC_MMAP_THRESHOLD_: '262144', NODE_OPTIONS: '"--max-semi-space-size=16"' }, arenas: '4', threshold: '262144', flag: undefined },
      ];
      for (const [index, { given, arenas, threshold, flag }] of cases.entries()) {
        const env = { PORT: '0', DATA_DIR: join(work, `data-${index}`), API_KEY: 'limits-api-key-0123456789', ...given };
        const { child, url } = await startSpoolCli(['serve'], env);
        try {
          await waitForReady(url, 30_000);
          // The pid the test started is the one serving, with the limits in its environment and command line.
          const environment = readFileSync(`/proc/${child.pid}/environ`, 'utf8').split('\0');
          const commandLine = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
          expect(environment).toContain(`MALLOC_ARENA_MAX=${arenas}`);
          expect(environment).toContain(`MALLOC_MMAP_THRESHOLD_=${threshold}`);
          expect(commandLine).toContain('serve');
          if (flag) expect(commandLine).toContain(flag);
          else expect(commandLine.some((argument) => argument.startsWith('--max-semi-space-size'))).toBe(false);
        } finally {
          await stop(child);
        }
      }
    },
  );
});

describe('a worker thread with a young generation of its own', () => {
  // Counts the young collections of a worker thread allocating about 40 MB of short-lived objects:
  // what a semi-space's size decides.
  const ALLOCATING = `
    const { parentPort } = require('node:worker_threads');
    const { PerformanceObserver, constants } = require('node:perf_hooks');
    let young = 0;
    new PerformanceObserver((list) => { for (const entry of list.getEntries()) if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MINOR) young++; }).observe({ entryTypes: ['gc'] });
    let kept;
    for (let index = 0; index < 400000; index++) kept = { index, pair: [index, index + 1], text: 'x' + index };
    setTimeout(() => parentPort.postMessage(young), 50);`;
  const youngCollections = (worker: Worker) =>
    new Promise<number>((resolve, reject) => {
      worker.once('error', reject);
      worker.once('message', (count: number) => {
        resolve(count);
        void worker.terminate();
      });
    });
  const allocating = () => new Worker(ALLOCATING, { eval: true });

  afterAll(() => setFlagsFromString('--min-semi-space-size=0 --max-semi-space-size=0'));

  it('gets its semi-space in a process started over with its own; the process keeps its flags; an operator’s flags stand', async () => {
    // As a started-over process runs: new isolates get the 2 MiB semi-space.
    setFlagsFromString(SEMI_SPACE_FLAG);
    const plain = await youngCollections(allocating());
    const own = await youngCollections(withSemiSpace(16, allocating, [SEMI_SPACE_FLAG]));
    const after = await youngCollections(allocating());
    const operators = await youngCollections(withSemiSpace(16, allocating, ['--max-semi-space-size=2', '--min-semi-space-size=1']));
    expect(own).toBeLessThan(plain / 3);
    expect(after).toBeGreaterThan(own * 3);
    expect(operators).toBeGreaterThan(own * 3);
  });

  it('puts the flags back when the worker cannot be created or fails to start', async () => {
    setFlagsFromString(SEMI_SPACE_FLAG);
    const plain = await youngCollections(allocating());
    expect(() =>
      withSemiSpace(16, () => {
        throw new Error('no thread');
      }, [SEMI_SPACE_FLAG]),
    ).toThrow('no thread');
    expect(await youngCollections(allocating())).toBeGreaterThan(plain / 2);
    const failing = withSemiSpace(16, () => new Worker('throw new Error("fails to start")', { eval: true }), [SEMI_SPACE_FLAG]);
    await new Promise((resolve) => failing.once('error', resolve));
    expect(await youngCollections(allocating())).toBeGreaterThan(plain / 2);
  });
});
