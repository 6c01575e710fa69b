import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { dumpReadModels } from '../projections/read-model-store.js';
import { FakeEngine } from './support/fake-engine.js';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { type WholeService, startTestService } from './support/service.js';

const JOB = { job_id: 'Acme-Summaries', model: 'tiny-chat', use_case: 'summaries', sla: '24h', price_1m_tokens: 2.5 };

describe('batches through the official openai client', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let client: OpenAI;

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({ env: { ENGINE_BASE_URL: engine.url, ENGINE_BACKOFF_MS: '10', ENGINE_MAX_ATTEMPTS: '3', ENGINE_CONCURRENCY: '4', BATCH_CHUNK_LINES: '3' } });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect((await reserveJob(service.url, JOB)).status).toBe(201);
  });
  afterAll(async () => {
    await service.close();
    await engine.stop();
  });

  it('runs a chat batch from upload to output, with every field of the batch object', async () => {
    const lines = Array.from({ length: 10 }, (_, index) => chatLine(`req-${index}`, `hello number ${index}`));
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'chat.jsonl'), purpose: 'batch' });
    const created = await createBatch(client, {
      input_file_id: input.id,
      endpoint: '/v1/chat/completions',
      completion_window: 'unlimited',
      metadata: { team: 'docs' },
      job_id: JOB.job_id,
    });
    expect(created).toMatchObject({
      object: 'batch',
      status: 'validating',
      endpoint: '/v1/chat/completions',
      completion_window: 'unlimited',
      input_file_id: input.id,
      job_id: 'Acme-Summaries',
      model: 'tiny-chat',
      price_1m_tokens: 2.5,
      request_counts: { completed: 0, failed: 0, total: 0 },
      usage: {
        prompt_tokens: 0, completion_tokens: 0, total_tokens: 0,
        input_tokens: 0, input_tokens_details: { cached_tokens: 0 }, output_tokens: 0, output_tokens_details: { reasoning_tokens: 0 },
      },
      processing_cost: 0,
      metadata: { team: 'docs' },
      errors: { object: 'list', data: [], omitted: 0 },
      in_progress_at: null,
      finalizing_at: null,
      completed_at: null,
      failed_at: null,
      expired_at: null,
      cancelling_at: null,
      cancelled_at: null,
      output_file_id: null,
      error_file_id: null,
    });
    expect(Object.keys(created).sort()).toEqual(
      [
        'id', 'object', 'completion_window', 'created_at', 'endpoint', 'job_id', 'input_file_id', 'request_counts', 'status',
        'cancelling_at', 'cancelled_at', 'in_progress_at', 'finalizing_at', 'completed_at', 'failed_at', 'expired_at', 'expires_at',
        'output_file_id', 'error_file_id', 'errors', 'metadata', 'model', 'price_1m_tokens', 'processing_cost', 'usage',
      ].sort(),
    );
    expect(created.id).toMatch(/^batch_[0-9a-f]{24}$/);
    expect(created.expires_at).toBe(created.created_at + 86400);
    // Read back at once (read-your-writes): the batch as created, but for what its run may have moved
    // already (ten lines validate and run within milliseconds).
    const moving = new Set(['status', 'in_progress_at', 'finalizing_at', 'completed_at', 'request_counts', 'usage', 'processing_cost', 'output_file_id']);
    const settled = (batch: object) => Object.fromEntries(Object.entries(batch).filter(([key]) => !moving.has(key)));
    const retrieved = await client.batches.retrieve(created.id);
    expect(settled(retrieved)).toEqual(settled(created));
    expect(['validating', 'in_progress', 'finalizing', 'completed']).toContain(retrieved.status);

    const done = await waitForStatus(client, created.id, ['completed', 'failed']);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ completed: 10, failed: 0, total: 10 });
    for (const field of ['in_progress_at', 'finalizing_at', 'completed_at'] as const) expect(done[field]).toBeGreaterThanOrEqual(done.created_at);
    expect(done.failed_at).toBeNull();
    expect(done.error_file_id).toBeNull();
    expect(done.output_file_id).toMatch(/^file-/);
    const usage = (done as unknown as { usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } }).usage;
    // The stand-in counts words: "hello number N" is 3 prompt tokens, "echo: hello number N" 4 completion tokens.
    expect(usage).toEqual({
      prompt_tokens: 30, completion_tokens: 40, total_tokens: 70,
      input_tokens: 30, input_tokens_details: { cached_tokens: 0 }, output_tokens: 40, output_tokens_details: { reasoning_tokens: 0 },
    });
    expect((done as unknown as { processing_cost: number }).processing_cost).toBeCloseTo((70 * 2.5) / 1_000_000, 12);

    const output = await fileLines(client, done.output_file_id);
    expect(output.map((line) => line.custom_id)).toEqual(lines.map((_, index) => `req-${index}`));
    for (const line of output) {
      expect(line.id).toMatch(/^batch_req_[0-9a-f]{24}$/);
      expect(line.error).toBeNull();
      expect(line.response.status_code).toBe(200);
      expect(line.response.request_id).toMatch(/^req_/);
      expect(line.response.body.choices[0].message.content).toBe(`echo: hello number ${line.custom_id.slice(4)}`);
    }
    const outputFile = await client.files.retrieve(done.output_file_id!);
    expect(outputFile).toMatchObject({ purpose: 'batch_output', filename: `${created.id}_output.jsonl`, expires_at: null });
  });

  it('runs an embeddings batch, applying output_expires_after', async () => {
    const lines = ['one two', ['three', 'four five'], 'six'].map((input, index) =>
      JSON.stringify({ custom_id: `emb-${index}`, method: 'POST', url: '/v1/embeddings', body: { model: 'tiny-chat', input } }),
    );
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'emb.jsonl'), purpose: 'batch' });
    const created = await createBatch(client, {
      input_file_id: input.id,
      endpoint: '/v1/embeddings',
      completion_window: 'unlimited',
      job_id: JOB.job_id,
      output_expires_after: { anchor: 'created_at', seconds: 7200 },
    });
    const done = await waitForStatus(client, created.id, ['completed', 'failed']);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ completed: 3, failed: 0, total: 3 });
    const output = await fileLines(client, done.output_file_id);
    expect(output.map((line) => line.response.body.data.length)).toEqual([1, 2, 1]);
    expect((done as unknown as { usage: { prompt_tokens: number; total_tokens: number } }).usage).toMatchObject({ prompt_tokens: 6, total_tokens: 6 });
    const file = await client.files.retrieve(done.output_file_id!);
    expect(file.expires_at).toBe(file.created_at + 7200);
  });

  it("sends each line's body to the engine as the input file holds it, and the job's model where a line names none", async () => {
    // Written as no JSON.stringify writes: spaces, a number as 1.0, escapes a client chose.
    const asWritten = '{ "model" : "tiny-chat", "messages": [ {"role": "user", "content": "caf\\u00e9 \\/ as written"} ], "temperature": 1.0 }';
    const withoutModel = { messages: [{ role: 'user', content: 'no model named' }] };
    const lines = [
      `{"custom_id": "as-written", "method": "POST", "url": "/v1/chat/completions", "body": ${asWritten}}`,
      JSON.stringify({ custom_id: 'no-model', method: 'POST', url: '/v1/chat/completions', body: withoutModel }),
    ];
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'bytes.jsonl'), purpose: 'batch' });
    const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
    const done = await waitForStatus(client, created.id, ['completed', 'failed']);
    expect(done.request_counts).toEqual({ completed: 2, failed: 0, total: 2 });
    expect(engine.payloads).toContain(asWritten);
    const sentWithModel = engine.payloads.map((payload) => JSON.parse(payload) as Record<string, unknown>).find((body) => JSON.stringify(body.messages) === JSON.stringify(withoutModel.messages));
    expect(sentWithModel).toEqual({ ...withoutModel, model: 'tiny-chat' });
    const output = await fileLines(client, done.output_file_id);
    expect(output.map((line) => line.custom_id).sort()).toEqual(['as-written', 'no-model']);
  });

  it('puts failing lines in the error file and in errors.data, retrying transient failures', async () => {
    const lines = [
      chatLine('ok-1', 'fine'),
      chatLine('refused', 'please [fail:400]'),
      chatLine('flaky', 'recovers [flaky:2]'),
      chatLine('broken', 'always [fail:500]'),
      chatLine('ok-2', 'also fine'),
    ];
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'mixed.jsonl'), purpose: 'batch' });
    const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
    const done = await waitForStatus(client, created.id, ['completed', 'failed']);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ completed: 3, failed: 2, total: 5 });
    expect((await fileLines(client, done.output_file_id)).map((line) => line.custom_id)).toEqual(['ok-1', 'flaky', 'ok-2']);
    const errors = await fileLines(client, done.error_file_id);
    expect(errors.map((line) => [line.custom_id, line.response.status_code])).toEqual([
      ['refused', 400],
      ['broken', 500],
    ]);
    expect(errors[0]!.response.body.error.code).toBe('invalid_prompt');
    expect(done.errors?.data).toEqual([
      { code: 'invalid_prompt', line: 2, message: 'This request was refused by the engine', param: 'messages' },
      { code: 'http_500', line: 4, message: 'engine crashed', param: null },
    ]);
  });

  it('lists batches newest first and auto-paginates', async () => {
    const ids: string[] = [];
    const input = await client.files.create({ file: await toFile(Buffer.from(chatLine('x', 'list me')), 'one.jsonl'), purpose: 'batch' });
    for (let index = 0; index < 5; index++) {
      ids.push((await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id })).id);
    }
    const listed: string[] = [];
    for await (const batch of client.batches.list({ limit: 2 })) listed.push(batch.id);
    expect(listed.slice(0, 5)).toEqual([...ids].reverse());
    const page = await client.batches.list({ limit: 2 });
    expect(page.data).toHaveLength(2);
    expect(page.has_more).toBe(true);
  });

  it('keeps the requests in flight to the engine within its concurrency', async () => {
    engine.latencyMs = 30;
    engine.maxInFlight = 0;
    try {
      const lines = Array.from({ length: 24 }, (_, index) => chatLine(`slow-${index}`, `take your time ${index}`));
      const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'slow.jsonl'), purpose: 'batch' });
      const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
      // request_counts and usage move while the batch runs.
      let partial;
      for (let polls = 0; polls < 2000 && !partial; polls++) {
        const current = await client.batches.retrieve(created.id);
        const counts = current.request_counts!;
        if (current.status === 'in_progress' && counts.completed > 0 && counts.completed < 24) partial = current;
        else await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(partial?.request_counts?.total).toBe(24);
      expect((partial as unknown as { usage: { total_tokens: number } }).usage.total_tokens).toBeGreaterThan(0);
      const done = await waitForStatus(client, created.id, ['completed', 'failed']);
      expect(done.request_counts).toEqual({ completed: 24, failed: 0, total: 24 });
    } finally {
      engine.latencyMs = 0;
    }
    // ENGINE_CONCURRENCY (4) is a ceiling: the learned limit may sit below it, never above.
    expect(engine.maxInFlight).toBeLessThanOrEqual(4);
    expect(engine.maxInFlight).toBeGreaterThan(1);
  });

  it('rebuilds the job and batch read models identically from the log', async () => {
    await waitForStatus(client, (await client.batches.list({ limit: 1 })).data[0]!.id, ['completed']);
    const before = dumpReadModels(service.readModels);
    expect(before.batches!.length).toBeGreaterThan(5);
    expect(before.batch_chunks!.length).toBeGreaterThan(5);
    const dataDir = service.dataDir;
    await service.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(join(dataDir, `read-models.sqlite${suffix}`), { force: true });
    service = await startTestService({ dataDir, env: { ENGINE_BASE_URL: engine.url } });
    expect(dumpReadModels(service.readModels)).toEqual(before);
  });
});
