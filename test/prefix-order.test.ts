import type { ChildProcess } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { startSpoolCli } from './support/processes.js';
import { createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { TEST_API_KEY, tempDir, waitUntilReady } from './support/service.js';

// Prefix-aware order changes the order lines reach the engine, and nothing else: which lines run,
// their outcomes, the output and error files (in input order) and crash safety stay as they are.

const SYSTEM_PROMPTS = Array.from({ length: 6 }, (_, index) => `Prompt ${index}. ${'Answer from the shared manual, chapter by chapter. '.repeat(12)}`);

/** A chat line whose system prompt is one of SYSTEM_PROMPTS, spread over the file in no order. */
function line(index: number, prompts: number): string {
  const prompt = (index * 5) % prompts;
  const question = index % 23 === 4 ? `refuse me [fail:400] ${index}` : `question ${index}`;
  return JSON.stringify({
    custom_id: `line-${index}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'tiny-chat', messages: [{ role: 'system', content: SYSTEM_PROMPTS[prompt] }, { role: 'user', content: question }] },
  });
}

/** Which system prompt an engine request carried (the fake engine joins contents with spaces). */
const promptOf = (text: string) => SYSTEM_PROMPTS.findIndex((prompt) => text.startsWith(prompt));
/** How many times the prompt changes from one request to the next, plus one. */
const runsOf = (texts: readonly string[]) => texts.filter((text, index) => index === 0 || promptOf(text) !== promptOf(texts[index - 1]!)).length;

describe('prefix-aware order', () => {
  const engine = new FakeEngine();
  const children: ChildProcess[] = [];
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await engine.stop();
  });

  const baseEnv = (dataDir: string) => ({ PORT: '0', DATA_DIR: dataDir, API_KEY: TEST_API_KEY, ENGINE_BASE_URL: engine.url, ENGINE_BACKOFF_MS: '10', LOG_LEVEL: 'info' });

  async function start(env: Record<string, string>): Promise<{ child: ChildProcess; url: string; client: OpenAI }> {
    const spool = await startSpoolCli(['serve'], env);
    children.push(spool.child);
    await waitUntilReady(spool.url);
    return { ...spool, client: new OpenAI({ baseURL: `${spool.url}/v1`, apiKey: 'placeholder', maxRetries: 0 }) };
  }

  async function submit(spool: { url: string; client: OpenAI }, lines: string[]) {
    expect((await reserveJob(spool.url, { job_id: 'prefix-job', model: 'tiny-chat', use_case: 'prefix', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
    const input = await spool.client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'prefix.jsonl'), purpose: 'batch' });
    return createBatch(spool.client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'prefix-job' });
  }

  /** One batch, one line at a time (so the engine sees the order the runner chose), with the given BATCH_PREFIX_ORDER. */
  async function runInOrder(prefixOrder: 'auto' | 'off', lines: string[]) {
    await engine.start();
    engine.texts.length = 0;
    const dataDir = tempDir(`prefix-${prefixOrder}`);
    const spool = await start({ ...baseEnv(dataDir), ENGINE_CONCURRENCY: '1', BATCH_PARALLEL_CHUNKS: '1', BATCH_CHUNK_LINES: '10', BATCH_PREFIX_ORDER: prefixOrder });
    const batch = await submit(spool, lines);
    const done = await waitForStatus(spool.client, batch.id, ['completed', 'failed'], 60_000);
    const output = await fileLines(spool.client, done.output_file_id);
    const errors = await fileLines(spool.client, done.error_file_id);
    spool.child.kill('SIGTERM');
    await new Promise((resolve) => spool.child.once('exit', resolve));
    await engine.stop();
    return { done, output, errors, texts: [...engine.texts], dataDir, batchId: batch.id };
  }

  it('runs lines that share a system prompt back to back; outcomes and files are those of file order', async () => {
    const total = 120;
    const lines = Array.from({ length: total }, (_, index) => line(index, SYSTEM_PROMPTS.length));
    const laidOut = await runInOrder('auto', lines);
    const fileOrder = await runInOrder('off', lines);

    // File order changes prompt at almost every line; the laid-out order once per prompt.
    expect(runsOf(fileOrder.texts)).toBeGreaterThan(total / 2);
    expect(runsOf(laidOut.texts)).toBe(SYSTEM_PROMPTS.length);
    // Every line ran once in each.
    expect(laidOut.texts.length).toBe(total);
    expect([...laidOut.texts].sort()).toEqual([...fileOrder.texts].sort());

    for (const run of [laidOut, fileOrder]) {
      expect(run.done.status).toBe('completed');
      expect(run.done.request_counts).toEqual({ completed: run.output.length, failed: run.errors.length, total });
      // Both files list their lines in input order.
      const expectedErrors = lines.map((_, index) => index).filter((index) => index % 23 === 4);
      expect(run.errors.map((entry) => entry.custom_id)).toEqual(expectedErrors.map((index) => `line-${index}`));
      expect(run.output.map((entry) => entry.custom_id)).toEqual(lines.map((_, index) => index).filter((index) => index % 23 !== 4).map((index) => `line-${index}`));
    }
    // Same outcome for every line (request ids are the engine's own and differ from run to run).
    const outcomes = (run: typeof laidOut) => [...run.output, ...run.errors].map((entry) => ({ custom_id: entry.custom_id, status: entry.response?.status_code ?? null, body: entry.response?.body ?? null, error: entry.error }));
    expect(outcomes(laidOut)).toEqual(outcomes(fileOrder));
    // The output file's line ids are the batch's own, whatever order the lines ran in.
    expect(laidOut.output[0]!.id).toMatch(/^batch_req_/);

    // The work file is removed once the batch is over, and nothing is left in scratch.
    expect(existsSync(join(laidOut.dataDir, 'blobs', 'batches', laidOut.batchId, 'work.jsonl'))).toBe(false);
    expect(readdirSync(join(laidOut.dataDir, 'scratch'))).toEqual([]);
  });

  it('kill -9 mid-batch, restart: every line is in exactly one output or error line, in input order', async () => {
    await engine.start();
    engine.texts.length = 0;
    engine.latencyMs = 5;
    const sentBefore = engine.total;
    const env = { ...baseEnv(tempDir('prefix-crash')), ENGINE_CONCURRENCY: '8', BATCH_CHUNK_LINES: '25' };
    const total = 600;
    const lines = Array.from({ length: total }, (_, index) => line(index, SYSTEM_PROMPTS.length));
    let spool = await start(env);
    const batch = await submit(spool, lines);

    for (;;) {
      const current = await spool.client.batches.retrieve(batch.id);
      if (current.request_counts!.completed + current.request_counts!.failed >= total / 4) break;
      expect(current.status).not.toBe('completed');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    spool.child.kill('SIGKILL');
    await new Promise((resolve) => spool.child.once('exit', resolve));
    const sentBeforeCrash = engine.total - sentBefore;
    expect(sentBeforeCrash).toBeLessThan(total);
    // Laid out: the first lines sent carry few of the prompts, not all six as file order would.
    expect(new Set(engine.texts.slice(0, 100).map(promptOf)).size).toBeLessThanOrEqual(3);

    spool = await start(env);
    const done = await waitForStatus(spool.client, batch.id, ['completed', 'failed'], 60_000);
    expect(done.status).toBe('completed');
    const output = await fileLines(spool.client, done.output_file_id);
    const errors = await fileLines(spool.client, done.error_file_id);
    const seen = [...output, ...errors].map((entry) => entry.custom_id as string);
    expect(seen.length).toBe(total);
    expect(new Set(seen)).toEqual(new Set(lines.map((_, index) => `line-${index}`)));
    expect(errors.map((entry) => entry.custom_id)).toEqual(lines.map((_, index) => index).filter((index) => index % 23 === 4).map((index) => `line-${index}`));
    expect(output.map((entry) => Number(String(entry.custom_id).slice(5)))).toEqual([...output.map((entry) => Number(String(entry.custom_id).slice(5)))].sort((a, b) => a - b));
    expect(done.request_counts).toEqual({ completed: output.length, failed: errors.length, total });
    // The restart ran only what had no recorded outcome (plus what was in flight at the kill).
    expect(engine.total - sentBefore).toBeGreaterThanOrEqual(total);
    expect(engine.total - sentBefore).toBeLessThan(total + 100);
    spool.child.kill('SIGTERM');
  });
});
