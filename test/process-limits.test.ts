import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MALLOC_ARENA_MAX, SEMI_SPACE_MIB, startOverWith } from '../src/process/process-limits.js';
import { startSpoolCli, stop, waitForReady } from './support/processes.js';

const SEMI_SPACE_FLAG = `--max-semi-space-size=${SEMI_SPACE_MIB}`;

describe('the limits long-running processes start under', () => {
  it('serve, processor and relay start over with both, unless the operator set them; other commands never', () => {
    const both = { env: { MALLOC_ARENA_MAX }, nodeFlags: [SEMI_SPACE_FLAG] };
    expect(startOverWith([], {}, [], 'linux', true)).toEqual(both);
    expect(startOverWith(['serve', '--all'], {}, [], 'linux', true)).toEqual(both);
    expect(startOverWith(['processor', 'inference'], {}, ['--enable-source-maps'], 'linux', true)).toEqual(both);
    expect(startOverWith(['relay'], {}, [], 'linux', true)).toEqual(both);

    expect(startOverWith(['replay'], {}, [], 'linux', true)).toBeUndefined();
    expect(startOverWith(['checkpoint', 'create'], {}, [], 'linux', true)).toBeUndefined();
    expect(startOverWith(['help'], {}, [], 'linux', true)).toBeUndefined();
  });

  it("an operator's value stands, each on its own: the arena limit, and any young-generation flag", () => {
    expect(startOverWith(['serve'], { MALLOC_ARENA_MAX: '8' }, [], 'linux', true)).toEqual({ env: {}, nodeFlags: [SEMI_SPACE_FLAG] });
    expect(startOverWith(['serve'], {}, ['--max-semi-space-size=16'], 'linux', true)).toEqual({ env: { MALLOC_ARENA_MAX }, nodeFlags: [] });
    expect(startOverWith(['serve'], {}, ['--semi_space_growth_factor=1'], 'linux', true)).toEqual({ env: { MALLOC_ARENA_MAX }, nodeFlags: [] });
    // After the exec both are there, so it happens once.
    expect(startOverWith(['serve'], { MALLOC_ARENA_MAX }, [SEMI_SPACE_FLAG], 'linux', true)).toBeUndefined();
  });

  it('no arena limit off Linux (it is glibc\'s); no start-over without process.execve or under a parent\'s IPC channel', () => {
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
      const cases: Array<{ given: Record<string, string>; arenas: string; flag: string | undefined }> = [
        { given: {}, arenas: MALLOC_ARENA_MAX, flag: SEMI_SPACE_FLAG },
        // node accepts a quoted option in NODE_OPTIONS; it is the operator's all the same.
        { given: { MALLOC_ARENA_MAX: '4', NODE_OPTIONS: '"--max-semi-space-size=16"' }, arenas: '4', flag: undefined },
      ];
      for (const [index, { given, arenas, flag }] of cases.entries()) {
        const env = { PORT: '0', DATA_DIR: join(work, `data-${index}`), API_KEY: 'limits-api-key-0123456789', ...given };
        const { child, url } = await startSpoolCli(['serve'], env);
        try {
          await waitForReady(url, 30_000);
          // The pid the test started is the one serving, with the limits in its environment and command line.
          const environment = readFileSync(`/proc/${child.pid}/environ`, 'utf8').split('\0');
          const commandLine = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
          expect(environment).toContain(`MALLOC_ARENA_MAX=${arenas}`);
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
