import { spawnSync } from 'node:child_process';
import { runProcess } from './support/openai-java.js';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../src/platform/package-root.js';
import { type WholeService, startTestService } from './support/service.js';

const README = readFileSync(join(packageRoot, 'README.md'), 'utf8');
const quickStart = README.slice(README.indexOf('## Quick start'), README.indexOf('## What is there today'));
/** The fenced blocks of one language in the quick start, as printed. */
const blocks = (language: string) => [...quickStart.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((match) => match[1]!);

/**
 * The README's quick start, taken from README.md itself, run against a real service with the
 * built-in model, as a new user would: only the address differs (the test service's port).
 */
describe("README's quick start", () => {
  let service: WholeService;
  let dir: string;
  const printedUrl = 'http://127.0.0.1:8080';

  beforeAll(async () => {
    service = await startTestService();
    // Inside the package, so `import 'openai'` resolves as it does for a user in a clone.
    mkdirSync(join(packageRoot, '.cache'), { recursive: true });
    dir = mkdtempSync(join(packageRoot, '.cache', 'readme-'));
  });
  afterAll(async () => {
    await service.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs its curl commands as printed, creating its own input', async () => {
    const [, curl] = blocks('sh');
    expect(curl).toContain('> requests.jsonl');
    // Asynchronously: the service answers from this very process.
    const run = await runProcess('bash', ['-euo', 'pipefail', '-c', curl!.replaceAll(printedUrl, service.url)], 60_000, { cwd: dir });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('"object":"file"');
    expect(JSON.parse(readFileSync(join(dir, 'openapi.json'), 'utf8')).openapi).toBe('3.1.0');
  });

  it('runs its JavaScript batch as printed, saved as a .mjs file, and it is examples/quickstart.mjs', async () => {
    const [script] = blocks('js');
    expect(script).toBe(readFileSync(join(packageRoot, 'examples', 'quickstart.mjs'), 'utf8'));
    writeFileSync(join(dir, 'quickstart.mjs'), script!);
    const run = await runProcess(process.execPath, ['quickstart.mjs'], 120_000, { cwd: dir, env: { ...process.env, SPOOL_URL: service.url } });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^completed \{ completed: 3, failed: 0, total: 3 \}$/m);
    const outputs = run.stdout.split('\n').filter((line) => line.startsWith('{"id":"batch_req_'));
    expect(outputs.map((line) => (JSON.parse(line) as { custom_id: string }).custom_id)).toEqual(['q1', 'q2', 'q3']);
  }, 150_000);

  it('runs its embeddings batch as printed, with the similarities it prints', async () => {
    const shown = blocks('sh').find((block) => block.startsWith('node examples/embeddings.mjs'));
    expect(shown).toBeDefined();
    const printed = shown!.split('\n').filter((line) => line.startsWith('# ')).map((line) => line.slice(2));
    const run = await runProcess(process.execPath, [join(packageRoot, 'examples', 'embeddings.mjs')], 120_000, { cwd: dir, env: { ...process.env, SPOOL_URL: service.url } });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).toBe(printed[0]);
    // Each similarity within a few thousandths of the printed one (int8 runs vary a little with what shares them).
    for (const [index, line] of lines.slice(1).entries()) {
      const [label, value] = [line.slice(0, 14), Number(line.slice(14))];
      expect(label).toBe(printed[index + 1]!.slice(0, 14));
      expect(Math.abs(value - Number(printed[index + 1]!.slice(14)))).toBeLessThan(0.01);
    }
  }, 150_000);

  it('has a Python example that compiles', () => {
    const compile = spawnSync('python3', ['-m', 'py_compile', join(packageRoot, 'examples', 'quickstart.py')], { encoding: 'utf8', env: { ...process.env, PYTHONPYCACHEPREFIX: join(dir, 'pycache') } });
    expect(compile.stderr).toBe('');
    expect(compile.status).toBe(0);
  });
});
