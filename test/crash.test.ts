import type { ChildProcess } from 'node:child_process';
import OpenAI, { toFile } from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { startSpoolCli } from './support/processes.js';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { TEST_API_KEY, tempDir, waitUntilReady } from './support/service.js';

/** `spool serve` as its own OS process, as `npm start` runs it. */
async function startSpool(env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  return startSpoolCli(['serve'], env);
}

describe('crash safety', () => {
  const engine = new FakeEngine();
  const children: ChildProcess[] = [];
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await engine.stop();
  });

  it('kill -9 mid-batch, restart: the batch completes and every line is in exactly one output or error line', async () => {
    await engine.start();
    engine.latencyMs = 5;
    const dataDir = tempDir('crash');
    const env = {
      PORT: '0',
      DATA_DIR: dataDir,
      API_KEY: TEST_API_KEY,
      ENGINE_BASE_URL: engine.url,
      ENGINE_CONCURRENCY: '8',
      ENGINE_BACKOFF_MS: '10',
      BATCH_CHUNK_LINES: '25',
      LOG_LEVEL: 'warn',
    };
    let spool = await startSpool({ ...env, LOG_LEVEL: 'info' });
    children.push(spool.child);
    await waitUntilReady(spool.url);
    expect((await reserveJob(spool.url, { job_id: 'crash-job', model: 'tiny-chat', use_case: 'crash', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);

    const total = 600;
    const lines = Array.from({ length: total }, (_, index) => chatLine(`line-${index}`, index % 50 === 7 ? `refuse me [fail:400] ${index}` : `line ${index}`));
    let client = new OpenAI({ baseURL: `${spool.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'crash.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'crash-job' });

    // Kill it for real while lines are being recorded.
    for (;;) {
      const current = await client.batches.retrieve(batch.id);
      if (current.request_counts!.completed + current.request_counts!.failed >= total / 4) break;
      expect(current.status).not.toBe('completed');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    spool.child.kill('SIGKILL');
    await new Promise((resolve) => spool.child.once('exit', resolve));
    const sentBeforeCrash = engine.total;
    expect(sentBeforeCrash).toBeLessThan(total);

    spool = await startSpool({ ...env, LOG_LEVEL: 'info' });
    children.push(spool.child);
    client = new OpenAI({ baseURL: `${spool.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const done = await waitForStatus(client, batch.id, ['completed', 'failed'], 60_000);
    expect(done.status).toBe('completed');

    const output = await fileLines(client, done.output_file_id);
    const errors = await fileLines(client, done.error_file_id);
    const seen = [...output, ...errors].map((line) => line.custom_id as string);
    expect(seen.length).toBe(total);
    expect(new Set(seen).size).toBe(total);
    expect(new Set(seen)).toEqual(new Set(lines.map((_, index) => `line-${index}`)));
    expect(errors.map((line) => line.custom_id)).toEqual(lines.map((_, index) => index).filter((index) => index % 50 === 7).map((index) => `line-${index}`));
    expect(done.request_counts).toEqual({ completed: output.length, failed: errors.length, total });
    // The restarted service ran only what had no recorded outcome (plus what was in flight at the kill).
    expect(engine.total).toBeGreaterThanOrEqual(total);
    expect(engine.total).toBeLessThan(total + 100);
    spool.child.kill('SIGTERM');
  });

  it('kill -9 while many small batches validate, run and finalize together, restart: every line of each in exactly one output or error line', async () => {
    if (!engine.url) await engine.start();
    engine.latencyMs = 5;
    const dataDir = tempDir('crash-small');
    const env = { PORT: '0', DATA_DIR: dataDir, API_KEY: TEST_API_KEY, ENGINE_BASE_URL: engine.url, ENGINE_CONCURRENCY: '16', ENGINE_BACKOFF_MS: '10', BATCH_CHUNK_LINES: '4', LOG_LEVEL: 'info' };
    let spool = await startSpool(env);
    children.push(spool.child);
    await waitUntilReady(spool.url);
    expect((await reserveJob(spool.url, { job_id: 'crash-small', model: 'tiny-chat', use_case: 'crash', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
    let client = new OpenAI({ baseURL: `${spool.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });

    const batches = 40;
    const perBatch = 10;
    const linesOf = (batch: number) => Array.from({ length: perBatch }, (_, line) => chatLine(`b${batch}-${line}`, line === 3 ? `refuse me [fail:400] ${batch}` : `line ${batch} ${line}`));
    const inputs = await Promise.all(Array.from({ length: batches }, async (_, batch) => (await client.files.create({ file: await toFile(Buffer.from(linesOf(batch).join('\n')), `b${batch}.jsonl`), purpose: 'batch' })).id));
    const sentBefore = engine.total;
    const ids = await Promise.all(inputs.map(async (fileId) => (await createBatch(client, { input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'crash-small' })).id));

    // Kill it for real once some batches have ended and others have not.
    for (;;) {
      const ended = (await client.batches.list({ limit: 100 })).data.filter((batch) => batch.status === 'completed').length;
      expect(ended).toBeLessThan(batches);
      if (ended >= batches / 4) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    spool.child.kill('SIGKILL');
    await new Promise((resolve) => spool.child.once('exit', resolve));

    spool = await startSpool(env);
    children.push(spool.child);
    client = new OpenAI({ baseURL: `${spool.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    for (const [batch, id] of ids.entries()) {
      const done = await waitForStatus(client, id, ['completed', 'failed'], 60_000);
      expect(done.status).toBe('completed');
      const output = await fileLines(client, done.output_file_id);
      const errors = await fileLines(client, done.error_file_id);
      const seen = [...output, ...errors].map((line) => line.custom_id as string);
      expect(seen.sort()).toEqual(linesOf(batch).map((_, line) => `b${batch}-${line}`).sort());
      expect(errors.map((line) => line.custom_id)).toEqual([`b${batch}-3`]);
      expect(done.request_counts).toEqual({ completed: perBatch - 1, failed: 1, total: perBatch });
    }
    // The restarted service ran only what had no recorded outcome (plus what was in flight at the kill).
    const total = batches * perBatch;
    expect(engine.total - sentBefore).toBeGreaterThanOrEqual(total);
    expect(engine.total - sentBefore).toBeLessThan(total + 100);
    spool.child.kill('SIGTERM');
  });
});
