import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBatch, fileLines, reserveJob, waitForStatus, waitUntil } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { startSpoolCli, stop, waitForReady } from './support/processes.js';
import { TEST_API_KEY, uploadFile } from './support/service.js';

/**
 * DATA_DIR on a file system that fills up while the service runs (a 40 MiB tmpfs this test
 * mounts, then fills with a file): uploads and batch creations are refused with 507
 * insufficient_storage, /ready says degraded and /metrics spool_storage_full 1, the log holds one
 * warning rather than a stack trace per retry; once the file is removed, uploads work again, the
 * degradation ends, and a batch that ran across the episode ends with every line exactly once.
 * The service runs as a process of its own, so its real log and standard error are what is read.
 */

/** Mounts a small tmpfs, or says why it cannot be done here. */
function mountSmallFilesystem(): { dir: string } | { reason: string } {
  if (process.platform !== 'linux') return { reason: `tmpfs mounts are a Linux matter, this is ${process.platform}` };
  const dir = mkdtempSync(join(tmpdir(), 'spool-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=40m,mode=0700', 'tmpfs', dir], { stdio: 'pipe' });
    return { dir };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = String((error as { stderr?: Buffer }).stderr ?? '').trim();
    return { reason: `mounting a tmpfs was refused (${stderr || (error as Error).message}); it needs root or CAP_SYS_ADMIN` };
  }
}

/** Writes a file until the file system refuses any more: big writes, then page-sized ones. */
function fill(path: string): void {
  const file = openSync(path, 'w');
  try {
    for (const size of [1024 * 1024, 4096, 512]) {
      const bytes = Buffer.alloc(size, 1);
      for (;;) {
        try {
          writeSync(file, bytes);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
          break;
        }
      }
    }
  } finally {
    closeSync(file);
  }
}

const mounted = mountSmallFilesystem();
const whyNot = 'reason' in mounted ? mounted.reason : undefined;
const LINES = 60;
const MODEL = 'fake-chat';
const line = (index: number) => JSON.stringify({ custom_id: `line-${index}`, method: 'POST', url: '/v1/chat/completions', body: { model: MODEL, messages: [{ role: 'user', content: `question ${index}` }] } });
const INPUT = `${Array.from({ length: LINES }, (_, index) => line(index)).join('\n')}\n`;

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

describe.skipIf(whyNot !== undefined)(`DATA_DIR on a file system that fills up${whyNot ? ` (skipped: ${whyNot})` : ''}`, () => {
  const root = 'dir' in mounted ? mounted.dir : '';
  const filler = join(root, 'filler');
  const engine = new FakeEngine();
  let spool: { child: ChildProcess; url: string } | undefined;
  let client: OpenAI;
  let stdout = '';
  let stderr = '';
  let runningBatch = '';
  let spareInput = '';
  const logLines = (): LogLine[] =>
    stdout
      .split('\n')
      .filter((text) => text.startsWith('{'))
      .map((text) => JSON.parse(text) as LogLine);
  const get = async (path: string) => {
    const answer = await fetch(`${spool!.url}${path}`);
    return { status: answer.status, text: await answer.text() };
  };
  const storageFullGauge = async () => /^spool_storage_full (\d+)$/m.exec((await get('/metrics')).text)?.[1];

  beforeAll(async () => {
    await engine.start();
    engine.latencyMs = 300;
    const dataDir = join(root, 'data');
    mkdirSync(dataDir);
    spool = await startSpoolCli(['serve'], {
      PORT: '0',
      DATA_DIR: dataDir,
      API_KEY: TEST_API_KEY,
      LOG_FORMAT: 'json',
      ENGINE_BASE_URL: engine.url,
      ENGINE_CONCURRENCY: '4',
      BATCH_CHUNK_LINES: '6',
    });
    spool.child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    spool.child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await waitForReady(spool.url, 60_000);
    client = new OpenAI({ baseURL: `${spool.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect((await reserveJob(spool.url, { job_id: 'full-job', model: MODEL, use_case: 'tests', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
  });
  afterAll(async () => {
    if (spool) await stop(spool.child);
    await engine.stop();
    // The service is stopped, so nothing holds the mount.
    if (root) {
      execFileSync('umount', [root]);
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('runs a batch, and keeps an input file for later, before the file system is full', async () => {
    const inputs = await Promise.all([0, 1].map(() => uploadFile(spool!.url, { purpose: 'batch', filename: 'in.jsonl', content: INPUT })));
    const [running, spare] = (await Promise.all(inputs.map((answer) => answer.json()))) as Array<{ id: string }>;
    spareInput = spare!.id;
    runningBatch = (await createBatch(client, { input_file_id: running!.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'full-job' })).id;
    await waitUntil(async () => (await client.batches.retrieve(runningBatch)).request_counts!.completed >= 4, 30_000);
    const batch = await client.batches.retrieve(runningBatch);
    expect(batch.status).toBe('in_progress');
    expect(batch.request_counts!.completed).toBeGreaterThanOrEqual(4);
    expect(batch.request_counts!.completed).toBeLessThan(LINES);
  });

  it('full: uploads and batch creations are 507 insufficient_storage, /ready is degraded, /metrics says so', async () => {
    fill(filler);
    const upload = await uploadFile(spool!.url, { purpose: 'batch', filename: 'late.jsonl', content: INPUT });
    const uploadBody = (await upload.json()) as { error: Record<string, string> };
    expect(upload.status, JSON.stringify(uploadBody)).toBe(507);
    expect(uploadBody).toEqual({ error: { message: expect.stringMatching(/out of storage space/), type: 'server_error', param: '', code: 'insufficient_storage' } });

    const created = await fetch(`${spool!.url}/v1/batches`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_file_id: spareInput, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'full-job' }),
    });
    const createdBody = (await created.json()) as { error: Record<string, string> };
    expect(created.status, JSON.stringify(createdBody)).toBe(507);
    expect(createdBody.error).toMatchObject({ type: 'server_error', param: '', code: 'insufficient_storage' });

    const ready = await get('/ready');
    expect(ready.status).toBe(200);
    const report = JSON.parse(ready.text) as { status: string; degraded: string[] };
    expect(report.status).toBe('degraded');
    expect(report.degraded).toContain('storage full: writes are refused until space is freed');
    expect(await storageFullGauge()).toBe('1');
  });

  it('full: the log says so once, while the batch keeps trying, with no stack trace and nothing on stderr', async () => {
    // The chunks being run fail to record their lines and are tried again meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 4000));
    const lines = logLines();
    const warnings = lines.filter((entry) => entry.msg.startsWith('storage is full'));
    expect(warnings, JSON.stringify(warnings)).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, component: 'storage' });
    expect(lines.filter((entry) => entry.level >= 50), JSON.stringify(lines.filter((entry) => entry.level >= 50)).slice(0, 2000)).toEqual([]);
    expect(stdout).not.toMatch(/\\n\s+at /);
    expect(stderr).toBe('');
    expect((await client.batches.retrieve(runningBatch)).status).toBe('in_progress');
  });

  it('space freed: uploads work again, the degradation ends and is logged once, and the batch ends with every line exactly once', async () => {
    unlinkSync(filler);
    const upload = await uploadFile(spool!.url, { purpose: 'batch', filename: 'after.jsonl', content: INPUT });
    expect(upload.status, await upload.clone().text()).toBe(200);
    await waitUntil(async () => JSON.parse((await get('/ready')).text).status === 'ready', 15_000);
    const report = JSON.parse((await get('/ready')).text) as { status: string; degraded: string[] };
    expect(report).toMatchObject({ status: 'ready', degraded: [] });
    expect(await storageFullGauge()).toBe('0');
    const recovered = logLines().filter((entry) => entry.msg === 'storage has space again');
    expect(recovered).toHaveLength(1);
    expect(recovered[0]).toMatchObject({ level: 30, component: 'storage' });

    const done = await waitForStatus(client, runningBatch, ['completed', 'failed'], 90_000);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ completed: LINES, failed: 0, total: LINES });
    const output = await fileLines(client, done.output_file_id);
    expect(output.map((entry) => entry.custom_id as string).sort()).toEqual(Array.from({ length: LINES }, (_, index) => `line-${index}`).sort());
    const history = JSON.parse((await get(`/v1/batches/${runningBatch}/events?limit=1000`)).text) as { data: Array<{ type: string; data: { line: number } }> };
    const outcomes = history.data.filter((event) => event.type === 'LineCompleted' || event.type === 'LineFailed').map((event) => event.data.line);
    expect(outcomes.sort((a, b) => a - b)).toEqual(Array.from({ length: LINES }, (_, index) => index + 1));

    // The batch refused while the disk was full can be created now.
    const created = await createBatch(client, { input_file_id: spareInput, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'full-job' });
    expect(created.status).toBe('validating');
    expect(lines(logLines())).toEqual({ full: 1, spaceAgain: 1 });
    expect(stderr).toBe('');
  });
});

/** How many times each end of an episode was logged. */
function lines(entries: readonly LogLine[]): { full: number; spaceAgain: number } {
  return { full: entries.filter((entry) => entry.msg.startsWith('storage is full')).length, spaceAgain: entries.filter((entry) => entry.msg === 'storage has space again').length };
}
