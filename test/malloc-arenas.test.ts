import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MALLOC_ARENA_MAX, needsArenaLimit } from '../src/malloc-arenas.js';
import { startSpoolCli, stop, waitForReady } from './support/processes.js';

describe('the malloc arena limit of long-running processes', () => {
  it('is set for serve, processor and relay on Linux, unless the operator set one', () => {
    expect(needsArenaLimit([], {}, 'linux', true)).toBe(true);
    expect(needsArenaLimit(['serve', '--all'], {}, 'linux', true)).toBe(true);
    expect(needsArenaLimit(['processor', 'inference'], {}, 'linux', true)).toBe(true);
    expect(needsArenaLimit(['relay'], {}, 'linux', true)).toBe(true);

    expect(needsArenaLimit(['replay'], {}, 'linux', true)).toBe(false);
    expect(needsArenaLimit(['checkpoint', 'create'], {}, 'linux', true)).toBe(false);
    expect(needsArenaLimit(['help'], {}, 'linux', true)).toBe(false);
    expect(needsArenaLimit(['serve'], { MALLOC_ARENA_MAX: '8' }, 'linux', true)).toBe(false);
    expect(needsArenaLimit(['serve'], {}, 'darwin', true)).toBe(false);
    expect(needsArenaLimit(['serve'], {}, 'linux', false)).toBe(false);
    // A parent's IPC channel would not survive the exec.
    expect(needsArenaLimit(['serve'], { NODE_CHANNEL_FD: '3' }, 'linux', true)).toBe(false);
  });

  const work = mkdtempSync(join(tmpdir(), 'spool-arenas-'));
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it.runIf(process.platform === 'linux' && typeof process.execve === 'function')(
    '`spool serve` runs under it in the process it was started as, and an operator\'s value stands',
    async () => {
      for (const [given, expected] of [[undefined, MALLOC_ARENA_MAX], ['4', '4']] as const) {
        const env = { PORT: '0', DATA_DIR: join(work, `data-${given ?? 'default'}`), API_KEY: 'arenas-api-key-0123456789', ...(given ? { MALLOC_ARENA_MAX: given } : {}) };
        const { child, url } = await startSpoolCli(['serve'], env);
        try {
          await waitForReady(url, 30_000);
          // The pid the test started is the one serving, with the limit in its environment.
          const environment = readFileSync(`/proc/${child.pid}/environ`, 'utf8').split('\0');
          expect(environment).toContain(`MALLOC_ARENA_MAX=${expected}`);
          expect(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0')).toContain('serve');
        } finally {
          await stop(child);
        }
      }
    },
  );
});
