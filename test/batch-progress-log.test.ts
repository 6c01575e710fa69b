import { Writable } from 'node:stream';
import OpenAI, { toFile } from 'openai';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatLine, createBatch, reserveJob, waitForStatus, waitUntil } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { ManualClock, type WholeService, startTestService } from './support/service.js';

const JOB = { job_id: 'progress-job', model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1 };
type Entry = Record<string, unknown> & { msg: string; level: number };

/** A service whose info log lines this test reads, as the JSON objects pino writes. */
async function serviceLoggingTo(engineUrl: string, progressSeconds: string, clock?: ManualClock): Promise<{ service: WholeService; entries: Entry[] }> {
  const entries: Entry[] = [];
  let pending = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) if (line) entries.push(JSON.parse(line) as Entry);
      done();
    },
  });
  const service = await startTestService({
    logger: pino({ level: 'info' }, sink),
    ...(clock ? { clock } : {}),
    env: {
      ENGINE_BASE_URL: engineUrl,
      ENGINE_MODELS: 'tiny-chat',
      ENGINE_CONCURRENCY: '1',
      BATCH_CHUNK_LINES: '2',
      BATCH_PARALLEL_CHUNKS: '1',
      BATCH_PROGRESS_LOG_SECONDS: progressSeconds,
    },
  });
  expect((await reserveJob(service.url, JOB)).status).toBe(201);
  return { service, entries };
}

/** Starts a batch of `count` lines of `lineMs` each. */
async function startSlowBatch(service: WholeService, count: number, lineMs: number) {
  const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
  const lines = Array.from({ length: count }, (_, index) => chatLine(`p-${index}`, `slowly [slow:${lineMs}] ${index}`));
  const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'input.jsonl'), purpose: 'batch' });
  const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
  return { client, batch };
}

/** Runs a batch of 10 lines of 400 ms each, one at a time: about 4 s. */
async function runSlowBatch(service: WholeService) {
  const { client, batch } = await startSlowBatch(service, 10, 400);
  const done = await waitForStatus(client, batch.id, ['completed', 'failed', 'expired', 'cancelled']);
  expect(done.status).toBe('completed');
  return done;
}

const progressLines = (entries: Entry[], batchId: string) => entries.filter((entry) => entry.msg.startsWith('batch progress') && entry.batch_id === batchId);
const summaryLine = (entries: Entry[], batchId: string) => entries.findIndex((entry) => entry.msg.startsWith('batch finished') && entry.batch_id === batchId);
/** Where the summary line is: the finalizer logs it once the batch is over and its chunks' parts are removed, a moment after the status shows. */
async function summaryLogged(entries: Entry[], batchId: string): Promise<number> {
  await waitUntil(() => summaryLine(entries, batchId) >= 0);
  return summaryLine(entries, batchId);
}

describe('batch progress log', () => {
  const engine = new FakeEngine();
  beforeAll(() => engine.start());
  afterAll(() => engine.stop());

  describe('with BATCH_PROGRESS_LOG_SECONDS=1', () => {
    let running: Awaited<ReturnType<typeof serviceLoggingTo>>;
    beforeAll(async () => {
      running = await serviceLoggingTo(engine.url, '1');
    });
    afterAll(() => running.service.close());

    it('logs, at info, lines done of total, failures, rate and estimated completion while the batch runs, then its summary line', async () => {
      const batch = await runSlowBatch(running.service);
      const progress = progressLines(running.entries, batch.id);
      expect(progress.length, JSON.stringify(progress)).toBeGreaterThanOrEqual(2);
      for (const entry of progress) {
        expect(entry.level).toBe(30);
        expect(entry).toMatchObject({ component: 'batch-progress', job_id: JOB.job_id, lines_total: 10, failed: 0 });
        expect(entry.lines_done).toBeTypeOf('number');
        expect(entry.lines_done as number).toBeLessThanOrEqual(10);
        expect(entry.msg.startsWith(`batch progress: ${entry.lines_done as number} of 10 lines done, 0 failed`), entry.msg).toBe(true);
      }
      // Lines only when something moved: each one reports more lines done than the one before.
      const done = progress.map((entry) => entry.lines_done as number);
      expect(done, JSON.stringify(done)).toEqual([...done].sort((a, b) => a - b));
      expect(new Set(done).size).toBe(done.length);
      // Once lines settled, a rate and an estimate: in the future, as an ISO time and as seconds.
      const estimated = progress.filter((entry) => entry.lines_per_second !== null);
      expect(estimated.length).toBeGreaterThanOrEqual(1);
      for (const entry of estimated) {
        expect(entry.lines_per_second as number).toBeGreaterThan(0);
        expect(entry.lines_per_second as number).toBeLessThan(10);
        expect(Date.parse(entry.estimated_completion_at as string)).not.toBeNaN();
        expect(entry.seconds_left as number).toBeGreaterThanOrEqual(0);
      }
      const lastProgress = running.entries.lastIndexOf(progress.at(-1)!);
      expect(await summaryLogged(running.entries, batch.id)).toBeGreaterThan(lastProgress);
    }, 40_000);
  });

  describe('with BATCH_PROGRESS_LOG_SECONDS=0', () => {
    let running: Awaited<ReturnType<typeof serviceLoggingTo>>;
    beforeAll(async () => {
      running = await serviceLoggingTo(engine.url, '0');
    });
    afterAll(() => running.service.close());

    it('logs no progress lines, only the summary line', async () => {
      const batch = await runSlowBatch(running.service);
      expect(progressLines(running.entries, batch.id)).toEqual([]);
      expect(await summaryLogged(running.entries, batch.id)).toBeGreaterThanOrEqual(0);
    }, 40_000);
  });

  describe('for a batch that does not move', () => {
    const clock = new ManualClock();
    let running: Awaited<ReturnType<typeof serviceLoggingTo>>;
    beforeAll(async () => {
      running = await serviceLoggingTo(engine.url, '1', clock);
    });
    afterAll(() => running.service.close());

    it('logs one line, then one more only when a minute passed with nothing moving', async () => {
      // One line that takes 6 s: for those seconds nothing settles.
      const { client, batch } = await startSlowBatch(running.service, 1, 6000);
      const lines = () => progressLines(running.entries, batch.id);
      const until = Date.now() + 5000;
      while (lines().length === 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(lines()).toHaveLength(1);
      // Checked every second for 2.5 s with nothing moving: no new line.
      await new Promise((resolve) => setTimeout(resolve, 2500));
      expect(lines()).toHaveLength(1);
      clock.advance(60);
      const later = Date.now() + 2000;
      while (lines().length === 1 && Date.now() < later) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(lines().map((entry) => [entry.lines_done, entry.lines_total, entry.lines_per_second])).toEqual([
        [0, 1, null],
        [0, 1, null],
      ]);
      expect((await waitForStatus(client, batch.id, ['completed', 'failed', 'expired', 'cancelled'])).status).toBe('completed');
      expect(lines()).toHaveLength(2);
    }, 40_000);
  });
});
