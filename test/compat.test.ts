import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../src/service.js';
import { chatLine, createBatch, fileLines, waitForStatus } from './support/batch-helpers.js';
import { TEST_API_KEY, startTestService } from './support/service.js';

/** The default fleet: the built-in model spool-tiny on a checkpoint generated at first start (and the embedding model, test/embeddings.test.ts). */
describe('/compat/v1 on the built-in model, through the official openai client', () => {
  let service: RunningService;
  let client: OpenAI;
  beforeAll(async () => {
    service = await startTestService();
    client = new OpenAI({ baseURL: `${service.url}/compat/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
  });
  afterAll(async () => {
    await service.close();
  });

  it('lists the fleet’s models', async () => {
    const models = [];
    for await (const model of client.models.list()) models.push(model.id);
    expect(models).toEqual(['spool-tiny', 'all-minilm-l6-v2']);
  });

  it('chats, deterministically for a seed, with real usage', async () => {
    const request = { model: 'spool-tiny', messages: [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'Hello!' }], max_tokens: 24, seed: 3 };
    const first = await client.chat.completions.create(request);
    const again = await client.chat.completions.create(request);
    expect(first.object).toBe('chat.completion');
    expect(first.choices[0]!.message.role).toBe('assistant');
    expect(first.choices[0]!.message.content).toBe(again.choices[0]!.message.content);
    expect(['stop', 'length']).toContain(first.choices[0]!.finish_reason);
    // The chat template (docs/API.md) rendered to bytes, plus BOS.
    const template = '<|system|>\nBe brief.\n<|user|>\nHello!\n<|assistant|>\n';
    expect(first.usage?.prompt_tokens).toBe(1 + Buffer.byteLength(template));
    expect(first.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it('streams a chat answer as server-sent chunks that add up to the whole answer', async () => {
    const request = { model: 'spool-tiny', messages: [{ role: 'user' as const, content: 'Stream please' }], max_tokens: 30, seed: 9, temperature: 0 };
    const whole = await client.chat.completions.create(request);
    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let chunks = 0;
    let finish: string | null | undefined;
    let usage;
    for await (const chunk of stream) {
      chunks += 1;
      expect(chunk.object).toBe('chat.completion.chunk');
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(chunks).toBeGreaterThan(3);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    expect(usage).toEqual(whole.usage);
  });

  it('completes, embeds and answers the Responses API', async () => {
    const completion = await client.completions.create({ model: 'spool-tiny', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
    expect(completion.choices[0]!.text.length).toBeGreaterThan(0);
    expect(completion.usage?.prompt_tokens).toBe(1 + 'Once upon a time'.length);

    // The client asks for base64 by default and decodes it.
    const embedding = await client.embeddings.create({ model: 'spool-tiny', input: ['alpha', 'beta'] });
    expect(embedding.data).toHaveLength(2);
    expect(embedding.data[0]!.embedding).toHaveLength(64);
    expect(Math.hypot(...embedding.data[0]!.embedding)).toBeCloseTo(1, 4);
    const asFloat = await client.embeddings.create({ model: 'spool-tiny', input: 'alpha', encoding_format: 'float' });
    expect(asFloat.data[0]!.embedding[0]).toBeCloseTo(embedding.data[0]!.embedding[0]!, 6);

    const response = await client.responses.create({ model: 'spool-tiny', input: 'Say something', max_output_tokens: 10 });
    expect(response.status).toBe('completed');
    expect(typeof response.output_text).toBe('string');
    expect(response.usage?.output_tokens).toBeGreaterThan(0);
  });

  it('answers errors as the OpenAI envelope: no key, unknown model, a bad request', async () => {
    const anonymous = new OpenAI({ baseURL: `${service.url}/compat/v1`, apiKey: 'wrong-key', maxRetries: 0 });
    await expect(anonymous.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    await expect(client.chat.completions.create({ model: 'gpt-none', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
    await expect(client.completions.create({ model: 'spool-tiny', prompt: 'x'.repeat(600) })).rejects.toMatchObject({ status: 400, code: 'context_length_exceeded' });
  });

  it('runs a batch on the built-in model with the demo job, with real model output', async () => {
    const files = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const lines = [0, 1, 2].map((index) => chatLine(`demo-${index}`, `question ${index}`, { body: { model: 'spool-tiny', messages: [{ role: 'user', content: `question ${index}` }], max_tokens: 8, temperature: 0 } }));
    const input = await files.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'demo.jsonl'), purpose: 'batch' });
    const created = await createBatch(files, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-demo' });
    expect(created.model).toBe('spool-tiny');
    const done = await waitForStatus(files, created.id, ['completed', 'failed']);
    expect(done.status).toBe('completed');
    const output = await fileLines(files, done.output_file_id);
    expect(output).toHaveLength(3);
    for (const [index, line] of output.entries()) {
      const direct = await client.chat.completions.create({ model: 'spool-tiny', messages: [{ role: 'user', content: `question ${index}` }], max_tokens: 8, temperature: 0 });
      expect(line.response.body.choices[0].message.content).toBe(direct.choices[0]!.message.content);
    }
  });
});
