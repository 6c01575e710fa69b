import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeEngine } from './support/fake-engine.js';
import { chatLine, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { type WholeService, startTestService } from './support/service.js';

const JOB = { job_id: 'strict-answers', model: 'tiny-chat', use_case: 'strict', sla: '24h', price_1m_tokens: 1 };

type Usage = Record<string, unknown> & { input_tokens_details: { cached_tokens: number }; output_tokens_details: { reasoning_tokens: number } };

/** The fields OpenAI's own schemas require, beside the spec's, as the official clients see them. */
describe('answers that satisfy the official schemas', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let client: OpenAI;

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({ env: { ENGINE_BASE_URL: engine.url, ENGINE_CONCURRENCY: '4', BATCH_CHUNK_LINES: '2' } });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect((await reserveJob(service.url, JOB)).status).toBe(201);
  });
  afterAll(async () => {
    await service.close();
    await engine.stop();
  });

  it('gives batch usage in both shapes in every status, with the cached and reasoning tokens the engine reports', async () => {
    const lines = [chatLine('a', 'one [cached:3]'), chatLine('b', 'two [reasoning:5]'), chatLine('c', 'three [cached:4] [reasoning:2]'), chatLine('d', 'four')];
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'usage.jsonl'), purpose: 'batch' });
    const created = await client.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited' as '24h', job_id: JOB.job_id } as Parameters<typeof client.batches.create>[0]);
    expect(created.status).toBe('validating');
    expect(created.usage).toEqual({
      prompt_tokens: 0, completion_tokens: 0, total_tokens: 0,
      input_tokens: 0, input_tokens_details: { cached_tokens: 0 }, output_tokens: 0, output_tokens_details: { reasoning_tokens: 0 },
    });
    const done = await waitForStatus(client, created.id, ['completed', 'failed']);
    expect(done.status).toBe('completed');
    const usage = done.usage as unknown as Usage;
    expect(usage.input_tokens).toBe(usage.prompt_tokens);
    expect(usage.output_tokens).toBe(usage.completion_tokens);
    expect(usage.input_tokens).toBeGreaterThan(0);
    expect(usage.input_tokens_details).toEqual({ cached_tokens: 7 });
    expect(usage.output_tokens_details).toEqual({ reasoning_tokens: 7 });
  });

  it('gives every file status "processed"', async () => {
    const created = await client.files.create({ file: await toFile(Buffer.from('{}\n'), 'status.jsonl'), purpose: 'user_data' });
    expect(created.status).toBe('processed');
    expect((await client.files.retrieve(created.id)).status).toBe('processed');
    const listed = await client.files.list({ purpose: 'user_data' });
    expect(listed.data.map((file) => file.status)).toEqual(['processed']);
  });

  it('answers string first_id and last_id on empty pages, and `after` keeps paging from them', async () => {
    const raw = async (path: string) => {
      const answer = await fetch(`${service.url}${path}`);
      expect(answer.status).toBe(200);
      return (await answer.json()) as { data: Array<{ id: string }>; first_id: unknown; last_id: unknown; has_more: boolean };
    };
    expect(await raw('/v1/files?purpose=fine-tune')).toMatchObject({ data: [], first_id: '', last_id: '', has_more: false });
    const first = await client.files.create({ file: await toFile(Buffer.from('x'), 'a.txt'), purpose: 'vision' });
    const onePage = await raw('/v1/files?purpose=vision&order=asc');
    expect(onePage).toMatchObject({ first_id: first.id, last_id: first.id, has_more: false });
    // Nothing after the newest: the empty page hands the cursor back, so asking again later finds what came since.
    const empty = await raw(`/v1/files?purpose=vision&order=asc&after=${onePage.last_id}`);
    expect(empty).toMatchObject({ data: [], first_id: first.id, last_id: first.id, has_more: false });
    const second = await client.files.create({ file: await toFile(Buffer.from('y'), 'b.txt'), purpose: 'vision' });
    expect((await raw(`/v1/files?purpose=vision&order=asc&after=${empty.last_id}`)).data.map((file) => file.id)).toEqual([second.id]);
    // The empty string means "from the start".
    expect((await raw('/v1/files?purpose=vision&order=asc&after=')).data.map((file) => file.id)).toEqual([first.id, second.id]);

    const batches = await raw('/v1/batches');
    const oldest = batches.data[batches.data.length - 1]!.id;
    expect(await raw(`/v1/batches?after=${oldest}`)).toMatchObject({ data: [], first_id: oldest, last_id: oldest, has_more: false });
    expect((await raw('/v1/batches?after=')).data.map((batch) => batch.id)).toEqual(batches.data.map((batch) => batch.id));
  });
});
