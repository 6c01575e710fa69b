import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD, SEMI_SPACE_MIB, startOverWith } from '../src/process/process-limits.js';
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
