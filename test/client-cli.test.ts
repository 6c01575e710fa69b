import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../src/platform/package-root.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir } from './support/service.js';

// The client commands of `spool`, run as a user runs them (the built CLI in its own process)
// against a real service over HTTP.

const cli = join(packageRoot, 'dist/src/process/cli.js');

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function start(args: string[], env: Record<string, string> = {}): { child: ChildProcess; done: Promise<Run>; stderr: () => string } {
  const child = spawn(process.execPath, [cli, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const done = new Promise<Run>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, done, stderr: () => stderr };
}

const spool = (args: string[], env: Record<string, string> = {}) => start(args, env).done;

const chatLines = (count: number, maxTokens = 8) =>
  `${Array.from({ length: count }, (_, index) => JSON.stringify({ custom_id: `q${index}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'spool-tiny', messages: [{ role: 'user', content: `line ${index}` }], max_tokens: maxTokens } })).join('\n')}\n`;

describe('spool, the client', () => {
  let service: WholeService;
  let dir: string;
  let base: Record<string, string>;

  beforeAll(async () => {
    service = await startTestService();
    dir = tempDir('spool-cli');
    base = { SPOOL_BASE_URL: service.url };
  });
  afterAll(async () => {
    await service?.close();
  });

  it('answers --version, --help on every level, and usage errors with exit 2 and that usage', async () => {
    const version = await spool(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^spool \d+\.\d+\.\d+\n$/);

    const bare = await spool([]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('usage: spool <command>');
    expect(bare.stderr).toContain('batch run|list|get|cancel|download|events');

    for (const args of [['serve', '--help'], ['batch', '--help'], ['batch', 'run', '--help'], ['files', 'upload', '--help'], ['weights', 'status', '--help']]) {
      const help = await spool(args);
      expect(help.code, args.join(' ')).toBe(0);
      expect(help.stdout, args.join(' ')).toMatch(/^usage: spool /);
    }

    const noFile = await spool(['batch', 'run', '--job', 'job-demo']);
    expect(noFile.code).toBe(2);
    expect(noFile.stderr).toContain('spool batch run takes 1 argument, got 0');
    expect(noFile.stderr).toContain('usage: spool batch run FILE --job JOB');
    const unknownOption = await spool(['files', 'list', '--colour']);
    expect(unknownOption.code).toBe(2);
    expect(unknownOption.stderr).toContain("Unknown option '--colour'");
    expect(unknownOption.stderr).toContain('usage: spool files list');
    const unknown = await spool(['batch', 'frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command: spool batch frobnicate');
  });

  it('runs a batch: uploads, creates, follows, saves the files, exits 0; plain progress lines without a terminal', async () => {
    const input = join(dir, 'requests.jsonl');
    writeFileSync(input, chatLines(20));
    const out = join(dir, 'out');
    const run = await spool(['batch', 'run', input, '--job', 'job-demo', '--out', out, '--metadata', 'team=eval'], base);
    expect(run.stderr).toMatch(/requests\.jsonl uploaded as file-\S+; batch batch_\S+ created/);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/batch_\S+ completed 20\/20 lines/);
    const batchId = /(batch_\S+) completed:/.exec(run.stdout)![1]!;
    expect(run.stdout).toContain(`${batchId} completed: 20 completed, 0 failed of 20`);
    expect(readdirSync(out)).toEqual([`${batchId}_output.jsonl`]);
    const lines = readFileSync(join(out, `${batchId}_output.jsonl`), 'utf8').trim().split('\n');
    expect(lines.map((line) => (JSON.parse(line) as { custom_id: string }).custom_id)).toEqual(Array.from({ length: 20 }, (_, index) => `q${index}`));

    const got = await spool(['batch', 'get', batchId, '--json'], base);
    expect(JSON.parse(got.stdout)).toMatchObject({ id: batchId, status: 'completed', metadata: { team: 'eval' } });
    const listed = await spool(['batch', 'list'], base);
    expect(listed.stdout).toContain(`${batchId}\tcompleted\t/v1/chat/completions\tjob-demo`);
    const events = await spool(['batch', 'events', batchId], base);
    expect(events.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { type: string }).type)).toContain('BatchCompleted');
  });

  it('shows a live progress line under a terminal', async () => {
    const input = join(dir, 'live.jsonl');
    writeFileSync(input, chatLines(150, 16));
    // `script` gives the command a pseudo-terminal, as a user's shell has.
    const command = [process.execPath, cli, 'batch', 'run', input, '--job', 'job-demo', '--out', join(dir, 'live')].map((part) => `'${part}'`).join(' ');
    const run = await new Promise<Run>((resolve) => {
      const child = spawn('script', ['-qefc', command, '/dev/null'], { env: { PATH: process.env.PATH ?? '', SPOOL_BASE_URL: service.url, TERM: 'xterm' }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr: '' }));
    });
    expect(run.code, run.stdout).toBe(0);
    // Redrawn in place: carriage return and erase-line before each state, the last one complete.
    const frames = run.stdout.split('\r\u001b[2K').slice(1);
    expect(frames.length).toBeGreaterThan(2);
    expect(frames.some((frame) => /in_progress \d+\/150 lines/.test(frame))).toBe(true);
    expect(frames.some((frame) => /lines\/s, about \S+ left/.test(frame))).toBe(true);
    expect(frames.at(-1)).toMatch(/completed 150\/150 lines/);
  });

  it('asks on Ctrl-C under a terminal whether to cancel, and cancels on yes', async () => {
    const input = join(dir, 'ask.jsonl');
    writeFileSync(input, chatLines(300, 64));
    // exec: the command in place of script's shell, which would otherwise take the SIGINT too and
    // die of it (an interactive shell waits for its foreground job instead).
    const command = `exec ${[process.execPath, cli, 'batch', 'run', input, '--job', 'job-demo', '--out', join(dir, 'ask')].map((part) => `'${part}'`).join(' ')}`;
    // The keys go through `script`'s terminal: Ctrl-C there is SIGINT to the command, as in a shell.
    const child = spawn('script', ['-qefc', command, '/dev/null'], { env: { PATH: process.env.PATH ?? '', SPOOL_BASE_URL: service.url, TERM: 'xterm' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let screen = '';
    child.stdout.on('data', (chunk: Buffer) => (screen += chunk.toString()));
    const code = new Promise<number | null>((resolve) => child.on('close', resolve));
    const until = async (pattern: RegExp) => {
      for (let i = 0; i < 400 && !pattern.test(screen); i++) await new Promise((resolve) => setTimeout(resolve, 25));
      expect(screen).toMatch(pattern);
    };
    await until(/in_progress \d+\/300 lines/);
    child.stdin.write('\u0003');
    await until(/Cancel (batch_\S+)\? \[y\/N\] /);
    const batchId = /Cancel (batch_\S+)\?/.exec(screen)![1]!;
    child.stdin.write('y\r');
    expect(await code, screen).toBe(5);
    expect(screen).toContain(`cancelling ${batchId}`);
    expect(screen).toContain(`${batchId} cancelled`);
    const status = JSON.parse((await spool(['batch', 'get', batchId, '--json'], base)).stdout) as { status: string };
    expect(status.status).toBe('cancelled');
  });

  it('exits with the documented code of a batch cancelled under it, and leaves a batch running on Ctrl-C without a terminal', async () => {
    const input = join(dir, 'slow.jsonl');
    writeFileSync(input, chatLines(300, 64));
    const running = start(['batch', 'run', input, '--job', 'job-demo', '--out', join(dir, 'slow')], base);
    for (let i = 0; i < 200 && !/batch (batch_\S+) created/.test(running.stderr()); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    const batchId = /batch (batch_\S+) created/.exec(running.stderr())![1]!;
    const cancelled = await spool(['batch', 'cancel', batchId], base);
    expect(cancelled.code).toBe(0);
    const run = await running.done;
    expect(run.code).toBe(5);
    expect(run.stdout).toContain(`${batchId} cancelled`);

    const left = start(['batch', 'run', input, '--job', 'job-demo', '--out', join(dir, 'left')], base);
    for (let i = 0; i < 200 && !/batch (batch_\S+) created/.test(left.stderr()); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    const leftId = /batch (batch_\S+) created/.exec(left.stderr())![1]!;
    left.child.kill('SIGINT');
    const interrupted = await left.done;
    expect(interrupted.code).toBe(130);
    expect(interrupted.stderr).toContain(`left running: ${leftId}`);
    const status = JSON.parse((await spool(['batch', 'get', leftId, '--json'], base)).stdout) as { status: string };
    expect(['validating', 'in_progress', 'finalizing', 'completed']).toContain(status.status);
    await spool(['batch', 'cancel', leftId], base);
  });

  it('lists, gets, downloads and deletes files; lists and reserves jobs and reads weights with the API key, and says so without it', async () => {
    const path = join(dir, 'plain.jsonl');
    writeFileSync(path, chatLines(2));
    const uploaded = JSON.parse((await spool(['files', 'upload', path, '--json'], base)).stdout) as { id: string; bytes: number };
    expect(uploaded.bytes).toBe(readFileSync(path).length);
    expect((await spool(['files', 'list'], base)).stdout).toContain(`${uploaded.id}\tplain.jsonl\tbatch`);
    expect((await spool(['files', 'get', uploaded.id], base)).stdout).toContain(`id: ${uploaded.id}`);
    const copy = join(dir, 'copy.jsonl');
    expect((await spool(['files', 'download', uploaded.id, '--out', copy], base)).code).toBe(0);
    expect(readFileSync(copy, 'utf8')).toBe(readFileSync(path, 'utf8'));
    expect((await spool(['files', 'delete', uploaded.id, '--json'], base)).stdout).toContain('"deleted": true');

    const refused = await spool(['jobs', 'list'], base);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('answered 401');
    expect(refused.stderr).toContain('set --api-key or SPOOL_API_KEY');
    const keyed = { ...base, SPOOL_API_KEY: TEST_API_KEY };
    const reserved = await spool(['jobs', 'reserve', 'job-cli', '--model', 'spool-tiny', '--sla', '24h', '--price', '0.1'], keyed);
    expect(reserved.code, reserved.stderr).toBe(0);
    expect((await spool(['jobs', 'list'], keyed)).stdout).toMatch(/^job-cli\tspool-tiny\t24h\t0\.1\t/m);
    const weights = JSON.parse((await spool(['weights', 'status', '--json'], keyed)).stdout) as { models: Record<string, unknown> };
    expect(Object.keys(weights.models)).toContain('spool-tiny');
  });
});
