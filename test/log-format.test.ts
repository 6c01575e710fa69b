import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../src/platform/package-root.js';
import { startNode, stop } from './support/processes.js';
import { TEST_API_KEY, tempDir } from './support/service.js';

/** Runs `spool serve` until it serves, and returns what it wrote. */
async function serveOutput(env: Record<string, string>): Promise<string> {
  const dataDir = tempDir('log-format');
  const base = { HOST: '127.0.0.1', PORT: '0', API_KEY: TEST_API_KEY, DATA_DIR: join(dataDir, 'data') };
  let output = '';
  // Pretty lines carry the URL as url=…, not in startSpoolCli's JSON form: wait for the message.
  const { child } = await startNode(join(packageRoot, 'dist/src/process/cli.js'), ['serve'], { ...base, ...env }, /spool is serving.*\n/);
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await new Promise((resolve) => setTimeout(resolve, 300));
  await stop(child);
  return output;
}

describe('log format', () => {
  it('LOG_FORMAT=pretty writes readable lines: time, level, component, message, key=value', async () => {
    const output = await serveOutput({ LOG_FORMAT: 'pretty' });
    const lines = output.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(() => JSON.parse(line), line).toThrow();
    expect(lines.some((line) => /^\d{2}:\d{2}:\d{2}\.\d{3} INFO +\S+ .+ \S+=\S+/.test(line)), lines.join('\n')).toBe(true);
  }, 60_000);

  it('writes JSON lines by default when stdout is not a terminal', async () => {
    const output = await serveOutput({});
    const lines = output.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect((JSON.parse(line) as { level: number }).level).toBeTypeOf('number');
  }, 60_000);
});
