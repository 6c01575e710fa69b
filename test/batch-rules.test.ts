import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../src/service.js';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { ManualClock, TEST_API_KEY, startTestService, tempDir } from './support/service.js';

const JOB = { job_id: 'rules-job', model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1 };

describe('batch rules', () => {
  const engine = new FakeEngine();
  const clock = new ManualClock();
  let service: RunningService;
  let client: OpenAI;

  async function upload(content: string, purpose: 'batch' | 'user_data' = 'batch') {
    return client.files.create({ file: await toFile(Buffer.from(content), 'input.jsonl'), purpose });
  }
  async function create(body: Record<string, unknown>) {
    return fetch(`${service.url}/v1/batches`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  }
  async function runBatch(content: string, endpoint = '/v1/chat/completions') {
    const input = await upload(content);
    const batch = await createBatch(client, { input_file_id: input.id, endpoint, completion_window: 'unlimited', job_id: JOB.job_id });
    return waitForStatus(client, batch.id, ['completed', 'failed', 'expired', 'cancelled']);
  }

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({
      clock,
      env: { ENGINE_BASE_URL: engine.url, ENGINE_MODELS: 'tiny-chat', ENGINE_BACKOFF_MS: '10', ENGINE_CONCURRENCY: '2', BATCH_CHUNK_LINES: '4', BATCH_PARALLEL_CHUNKS: '1' },
    });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect((await reserveJob(service.url, JOB)).status).toBe(201);
    expect((await reserveJob(service.url, { ...JOB, job_id: 'other-model', model: 'no-such-model' })).status).toBe(201);
  });
  afterAll(async () => {
    await service.close();
    await engine.stop();
  });

  describe('validating the input file: each violation fails the batch with its code and line', () => {
    const cases: Array<[string, string, Array<{ code: string; line: number | null; param?: string | null }>, string?]> = [
      ['not JSON', `${chatLine('a', 'x')}\n{"custom_id": oops}\n`, [{ code: 'invalid_json_line', line: 2 }]],
      ['a JSON array, not an object', `[1,2]\n`, [{ code: 'invalid_json_line', line: 1 }]],
      ['a duplicate custom_id', `${chatLine('a', 'x')}\n${chatLine('b', 'y')}\n${chatLine('a', 'z')}\n`, [{ code: 'duplicate_custom_id', line: 3, param: 'custom_id' }]],
      ['a url that is not the endpoint', `${chatLine('a', 'x')}\n${chatLine('b', 'y', { url: '/v1/completions' })}\n`, [{ code: 'url_mismatch', line: 2, param: 'url' }]],
      ['a method other than POST', `${chatLine('a', 'x', { method: 'GET' })}\n`, [{ code: 'invalid_request', line: 1, param: 'method' }]],
      ['a missing custom_id', `${JSON.stringify({ method: 'POST', url: '/v1/chat/completions', body: {} })}\n`, [{ code: 'invalid_request', line: 1, param: 'custom_id' }]],
      ['a body that is not an object', `${chatLine('a', 'x', { body: 'hello' })}\n`, [{ code: 'invalid_request', line: 1, param: 'body' }]],
      ['another model than the job’s', `${chatLine('a', 'x')}\n\n${chatLine('b', 'y', { body: { model: 'gpt-huge', messages: [] } })}\n`, [{ code: 'model_mismatch', line: 3, param: 'body.model' }]],
      ['an empty file', '\n\n', [{ code: 'empty_file', line: null }]],
    ];
    for (const [name, content, expected] of cases) {
      it(name, async () => {
        const batch = await runBatch(content);
        expect(batch.status).toBe('failed');
        expect(batch.failed_at).toBeGreaterThanOrEqual(batch.created_at);
        expect(batch.in_progress_at).toBeNull();
        expect(batch.output_file_id).toBeNull();
        expect(batch.errors?.data).toMatchObject(expected);
        for (const error of batch.errors?.data ?? []) expect(error.message?.length).toBeGreaterThan(0);
      });
    }

    it('more than 50,000 requests', async () => {
      const line = (index: number) => `{"custom_id":"${index}","method":"POST","url":"/v1/chat/completions","body":{}}`;
      const content = Array.from({ length: 50_001 }, (_, index) => line(index)).join('\n');
      const batch = await runBatch(content);
      expect(batch.status).toBe('failed');
      expect(batch.errors?.data).toEqual([{ code: 'too_many_tasks', line: 50_001, message: expect.stringContaining('50000'), param: null }]);
    });

    it('more than 50,000 embedding inputs across all requests', async () => {
      const inputs = Array.from({ length: 2000 }, () => 'x');
      const content = Array.from({ length: 26 }, (_, index) =>
        JSON.stringify({ custom_id: `e${index}`, method: 'POST', url: '/v1/embeddings', body: { input: inputs } }),
      ).join('\n');
      const batch = await runBatch(content, '/v1/embeddings');
      expect(batch.status).toBe('failed');
      expect(batch.errors?.data).toEqual([{ code: 'too_many_embedding_inputs', line: null, message: expect.stringContaining('52000'), param: 'input' }]);
    });

    it('a model no engine serves', async () => {
      const input = await upload(chatLine('a', 'x', { body: { messages: [] } }));
      const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'other-model' });
      const batch = await waitForStatus(client, created.id, ['failed', 'completed']);
      expect(batch.status).toBe('failed');
      expect(batch.errors?.data).toMatchObject([{ code: 'model_not_available', line: null }]);
    });
  });

  describe('creating a batch: every rule answers the error envelope naming the field', () => {
    let inputId: string;
    beforeAll(async () => {
      inputId = (await upload(chatLine('a', 'x'))).id;
    });
    const valid = () => ({ input_file_id: inputId, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
    const cases: Array<[string, (body: Record<string, unknown>) => Record<string, unknown>, string]> = [
      ['no input_file_id', ({ input_file_id: _, ...rest }) => rest, 'input_file_id'],
      ['an unknown input file', (body) => ({ ...body, input_file_id: 'file-nope' }), 'input_file_id'],
      ['an unknown endpoint', (body) => ({ ...body, endpoint: '/v1/images' }), 'endpoint'],
      ['a completion_window other than unlimited', (body) => ({ ...body, completion_window: '24h' }), 'completion_window'],
      ['no job_id', ({ job_id: _, ...rest }) => rest, 'job_id'],
      ['a job_id that was not reserved', (body) => ({ ...body, job_id: 'nobody' }), 'job_id'],
      ['a job_id that differs only in case', (body) => ({ ...body, job_id: 'RULES-JOB' }), 'job_id'],
      ['a job_id with white space around it', (body) => ({ ...body, job_id: ' rules-job ' }), 'job_id'],
      ['17 metadata pairs', (body) => ({ ...body, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`k${index}`, 'v'])) }), 'metadata'],
      ['a metadata key of 65 characters', (body) => ({ ...body, metadata: { ['k'.repeat(65)]: 'v' } }), 'metadata'],
      ['a metadata value of 513 characters', (body) => ({ ...body, metadata: { key: 'v'.repeat(513) } }), `metadata.key`],
      ['output_expires_after under an hour', (body) => ({ ...body, output_expires_after: { anchor: 'created_at', seconds: 3599 } }), 'output_expires_after.seconds'],
      ['output_expires_after over 30 days', (body) => ({ ...body, output_expires_after: { anchor: 'created_at', seconds: 2592001 } }), 'output_expires_after.seconds'],
      ['output_expires_after with another anchor', (body) => ({ ...body, output_expires_after: { anchor: 'completed_at', seconds: 3600 } }), 'output_expires_after.anchor'],
    ];
    for (const [name, change, param] of cases) {
      it(name, async () => {
        const before = (await client.batches.list({ limit: 100 })).data.length;
        const response = await create(change(valid()));
        expect(response.status).toBe(400);
        const body = (await response.json()) as { error: Record<string, string> };
        expect(body.error.param).toBe(param);
        expect(body.error.type).toBe('invalid_request_error');
        expect(typeof body.error.code).toBe('string');
        expect(body.error.message?.length).toBeGreaterThan(0);
        expect((await client.batches.list({ limit: 100 })).data.length).toBe(before);
      });
    }

    it('names the limit in the message', async () => {
      const metadata = Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`k${index}`, 'v']));
      expect(((await (await create({ ...valid(), metadata })).json()) as { error: { message: string } }).error.message).toContain('16');
      const long = { key: 'v'.repeat(513) };
      expect(((await (await create({ ...valid(), metadata: long })).json()) as { error: { message: string } }).error.message).toContain('512');
    });

    it('accepts a file of another purpose nowhere', async () => {
      const other = await upload(chatLine('a', 'x'), 'user_data');
      const response = await create({ ...valid(), input_file_id: other.id });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { message: string } }).error.message).toContain('purpose batch');
    });

    it('accepts 16 pairs of the largest size, and uses the job_id exactly as supplied', async () => {
      const metadata = Object.fromEntries(Array.from({ length: 16 }, (_, index) => [`${index}`.padEnd(64, 'k'), 'v'.repeat(512)]));
      const response = await create({ ...valid(), metadata });
      expect(response.status).toBe(200);
      const batch = (await response.json()) as { metadata: Record<string, string>; job_id: string; status: string };
      expect(batch.metadata).toEqual(metadata);
      expect(batch.job_id).toBe('rules-job');
    });
  });

  describe('cancelling', () => {
    it('cancels an in-progress batch: lines in flight finish, the rest go to the error file as batch_cancelled', async () => {
      const lines = Array.from({ length: 12 }, (_, index) => chatLine(`c-${index}`, `slowly [slow:150] ${index}`));
      const input = await upload(lines.join('\n'));
      const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
      await waitForStatus(client, created.id, ['in_progress']);
      const sentBefore = engine.total;
      const cancelling = await client.batches.cancel(created.id);
      expect(cancelling.status).toBe('cancelling');
      expect(cancelling.cancelling_at).toBeGreaterThanOrEqual(created.created_at);
      const done = await waitForStatus(client, created.id, ['cancelled']);
      // At most the requests in flight when cancelling began (concurrency 2) were still sent.
      expect(engine.total - sentBefore).toBeLessThanOrEqual(2);
      expect(done.cancelled_at).toBeGreaterThanOrEqual(done.cancelling_at!);
      const output = await fileLines(client, done.output_file_id);
      const errors = await fileLines(client, done.error_file_id);
      expect(output.length + errors.length).toBe(12);
      expect(new Set([...output, ...errors].map((line) => line.custom_id)).size).toBe(12);
      expect(errors.length).toBeGreaterThan(0);
      for (const line of errors) expect(line).toMatchObject({ response: null, error: { code: 'batch_cancelled' } });
      expect(done.request_counts).toEqual({ completed: output.length, failed: errors.length, total: 12 });

      // Cancelling again answers the batch unchanged; a finished batch cannot be cancelled.
      expect((await client.batches.cancel(created.id)).status).toBe('cancelled');
      const finished = await runBatch(chatLine('fin', 'quick'));
      await expect(client.batches.cancel(finished.id)).rejects.toBeInstanceOf(OpenAI.BadRequestError);
      await expect(client.batches.cancel('batch_000000000000000000000000')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    });
  });

  describe('expiry', () => {
    it('stops a batch past its expires_at: partial output, the rest batch_expired, status expired', async () => {
      // 10 lines of 1 s at concurrency 2 take 5 s: ample time for the expiry watch (1 s period)
      // to stop the batch even on a loaded machine.
      const lines = Array.from({ length: 10 }, (_, index) => chatLine(`x-${index}`, `slowly [slow:1000] ${index}`));
      const input = await upload(lines.join('\n'));
      const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
      expect(created.expires_at).toBe(created.created_at + 3600);
      await waitForStatus(client, created.id, ['in_progress']);
      clock.advance(3600);
      const done = await waitForStatus(client, created.id, ['expired', 'completed']);
      expect(done.status).toBe('expired');
      expect(done.expired_at).toBe(created.created_at + 3600);
      const output = await fileLines(client, done.output_file_id);
      const errors = await fileLines(client, done.error_file_id);
      expect(new Set([...output, ...errors].map((line) => line.custom_id)).size).toBe(10);
      expect(output.length + errors.length).toBe(10);
      expect(errors.length).toBeGreaterThan(0);
      for (const line of errors) expect(line.error.code).toBe('batch_expired');
    });
  });

  describe('a batch that cannot go on', () => {
    it('fails with a reason when its input file is deleted while it runs', async () => {
      engine.latencyMs = 0;
      // Three chunks of four lines, run one after the other: the first is slow.
      const lines = Array.from({ length: 12 }, (_, index) => chatLine(`d-${index}`, index < 4 ? `slowly [slow:300] ${index}` : `quick ${index}`));
      const input = await upload(lines.join('\n'));
      const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
      await waitForStatus(client, created.id, ['in_progress']);
      await client.files.delete(input.id);
      const done = await waitForStatus(client, created.id, ['failed', 'completed']);
      expect(done.status).toBe('failed');
      expect(done.errors?.data).toContainEqual(expect.objectContaining({ code: 'input_file_not_found', line: null }));
      expect(done.failed_at).toBeGreaterThanOrEqual(done.in_progress_at!);
    });
  });
});

describe('job definitions', () => {
  it('are reserved over /mgmt/v1 idempotently, conflicts refused, listed, and loaded from JOBS_FILE', async () => {
    const { writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const jobsFile = join(tempDir('jobs'), 'jobs.json');
    writeFileSync(jobsFile, JSON.stringify([{ job_id: 'from-file', model: 'm', use_case: 'u', sla: '7d', price_1m_tokens: 0.1 }]));
    const service = await startTestService({ env: { JOBS_FILE: jobsFile } });
    const headers = { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' };
    const job = { job_id: 'Job-A', model: 'm', use_case: 'search', sla: 'none', price_1m_tokens: 3 };
    const first = await fetch(`${service.url}/mgmt/v1/jobs`, { method: 'POST', headers, body: JSON.stringify(job) });
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ object: 'job', ...job, created_at: expect.any(Number) });
    expect((await fetch(`${service.url}/mgmt/v1/jobs`, { method: 'POST', headers, body: JSON.stringify(job) })).status).toBe(200);
    const conflict = await fetch(`${service.url}/mgmt/v1/jobs`, { method: 'POST', headers, body: JSON.stringify({ ...job, price_1m_tokens: 4 }) });
    expect(conflict.status).toBe(409);
    expect(((await conflict.json()) as { error: { param: string } }).error.param).toBe('job_id');
    const badSla = await fetch(`${service.url}/mgmt/v1/jobs`, { method: 'POST', headers, body: JSON.stringify({ ...job, job_id: 'x', sla: 'soon' }) });
    expect(badSla.status).toBe(400);
    expect((await fetch(`${service.url}/mgmt/v1/jobs`, { method: 'POST', body: JSON.stringify(job) })).status).toBe(401);
    const list = (await (await fetch(`${service.url}/mgmt/v1/jobs`, { headers })).json()) as { data: Array<{ job_id: string }> };
    expect(list.data.map((entry) => entry.job_id)).toEqual(['from-file', 'job-demo', 'job-embeddings', 'Job-A']);
    await service.close();
  });
});
