import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { S3BlobStore } from '../src/blob-store/s3-blob-store.js';
import { createS3Client } from '../src/platform/s3-client.js';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir } from './support/service.js';


/**
 * Two OpenAI-compatible HTTP replicas of one model. They are stand-ins (test/support/fake-engine.ts):
 * vLLM and SGLang need GPUs that CI does not have; the fleet talks to these over real sockets.
 */
describe('a fleet of HTTP replicas', () => {
  const vllm = new FakeEngine();
  const sglang = new FakeEngine();
  let service: WholeService;
  let client: OpenAI;

  beforeAll(async () => {
    await vllm.start();
    await sglang.start();
    const fleetFile = join(tempDir('fleet'), 'fleet.json');
    writeFileSync(
      fleetFile,
      JSON.stringify({
        models: {
          'tiny-chat': {
            replicas: [
              { kind: 'vllm', base_url: vllm.url, concurrency: 3 },
              { kind: 'sglang', base_url: sglang.url, concurrency: 3 },
            ],
          },
          'spool-tiny': { replicas: [{ kind: 'builtin' }] },
        },
      }),
    );
    service = await startTestService({ env: { FLEET_FILE: fleetFile, ENGINE_BACKOFF_MS: '10', ENGINE_COOLDOWN_MS: '60000', BATCH_CHUNK_LINES: '5' } });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect((await reserveJob(service.url, { job_id: 'fleet-job', model: 'tiny-chat', use_case: 'fleet', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
  });
  afterAll(async () => {
    await service.close();
    await vllm.stop();
    await sglang.stop();
  });

  async function runBatch(count: number, prefix: string, during?: (batchId: string) => Promise<void>) {
    const lines = Array.from({ length: count }, (_, index) => chatLine(`${prefix}-${index}`, `${prefix} line ${index}`));
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), `${prefix}.jsonl`), purpose: 'batch' });
    const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'fleet-job' });
    await during?.(created.id);
    return waitForStatus(client, created.id, ['completed', 'failed'], 60_000);
  }

  it('balances a batch across both replicas, within each one’s concurrency', async () => {
    vllm.latencyMs = 15;
    sglang.latencyMs = 15;
    const done = await runBatch(60, 'balance');
    expect(done.request_counts).toEqual({ completed: 60, failed: 0, total: 60 });
    const [a, b] = [vllm.total, sglang.total];
    expect(a + b).toBe(60);
    expect(Math.min(a, b)).toBeGreaterThanOrEqual(15);
    expect(vllm.maxInFlight).toBeLessThanOrEqual(3);
    expect(sglang.maxInFlight).toBeLessThanOrEqual(3);
    expect(service.app.hasRoute({ method: 'POST', url: '/compat/v1/chat/completions' })).toBe(true);
  });

  it('finishes a batch when a replica goes down mid-batch: its requests are retried on the other', async () => {
    vllm.latencyMs = 20;
    sglang.latencyMs = 20;
    const before = vllm.total;
    const done = await runBatch(80, 'failover', async (batchId) => {
      for (;;) {
        const batch = await client.batches.retrieve(batchId);
        if ((batch.request_counts?.completed ?? 0) >= 15) break;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      await sglang.stop();
    });
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ completed: 80, failed: 0, total: 80 });
    const output = await fileLines(client, done.output_file_id);
    expect(new Set(output.map((line) => line.custom_id)).size).toBe(80);
    expect(vllm.total - before).toBeGreaterThan(40);
    const pool = service.fleet.engineFor('tiny-chat')!;
    expect(pool.state().find((replica) => replica.id === 'tiny-chat/1')?.healthy).toBe(false);
  });

  it('serves /compat/v1 through the same replicas, streamed or not', async () => {
    vllm.latencyMs = 0;
    const compat = new OpenAI({ baseURL: `${service.url}/compat/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
    const before = vllm.total;
    const answer = await compat.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'hi there' }] });
    expect(answer.choices[0]!.message.content).toBe('echo: hi there');
    let streamed = '';
    for await (const chunk of await compat.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'stream it' }], stream: true })) {
      streamed += chunk.choices[0]?.delta.content ?? '';
    }
    expect(streamed).toBe('echo: stream it');
    expect(vllm.total - before).toBe(2);
    const models = [];
    for await (const model of compat.models.list()) models.push(model.id);
    expect(models.sort()).toEqual(['spool-tiny', 'tiny-chat']);
  });
});

describe('s3:// images in chat requests', () => {
  let service: WholeService;
  let images: S3BlobStore;
  const bucket = () => inject('s3Bucket');
  const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('a tiny picture')]);

  beforeAll(async () => {
    const s3 = { AWS_ENDPOINT_URL_S3: inject('s3Endpoint'), AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', S3_FORCE_PATH_STYLE: 'true' };
    service = await startTestService({ env: s3 });
    images = new S3BlobStore(createS3Client({ endpoint: s3.AWS_ENDPOINT_URL_S3, forcePathStyle: true }), { bucket: bucket(), prefix: 'images' });
    await images.put('cat.png', Readable.from([png]));
    await images.put('dog.jpg', Readable.from([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3])]));
    await images.put('notes.txt', Readable.from([Buffer.from('not an image at all')]));
  });
  afterAll(async () => {
    await service.close();
  });

  const imageLine = (id: string, urls: string[]) =>
    chatLine(id, '', {
      body: {
        model: 'spool-tiny',
        max_tokens: 4,
        messages: [
          { role: 'system', content: 'Describe the images.' },
          { role: 'user', content: [{ type: 'text', text: 'What is this?' }, ...urls.map((url) => ({ type: 'image_url', image_url: { url } }))] },
        ],
      },
    });

  it('fails exactly the lines whose image cannot be fetched', async () => {
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const lines = [
      imageLine('one-image', [`s3://${bucket()}/images/cat.png`]),
      imageLine('two-images', [`s3://${bucket()}/images/cat.png`, `s3://${bucket()}/images/dog.jpg`]),
      imageLine('missing', [`s3://${bucket()}/images/nowhere.png`]),
      imageLine('not-an-image', [`s3://${bucket()}/images/notes.txt`]),
      imageLine('no-bucket', ['s3://no-such-bucket-here/cat.png']),
      chatLine('text-only', 'plain text', { body: { model: 'spool-tiny', max_tokens: 4, messages: [{ role: 'user', content: 'plain text' }] } }),
    ];
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'images.jsonl'), purpose: 'batch' });
    const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-demo' });
    const done = await waitForStatus(client, created.id, ['completed', 'failed']);
    expect(done.status).toBe('completed');
    expect((await fileLines(client, done.output_file_id)).map((line) => line.custom_id)).toEqual(['one-image', 'two-images', 'text-only']);
    const errors = await fileLines(client, done.error_file_id);
    expect(errors.map((line) => line.custom_id)).toEqual(['missing', 'not-an-image', 'no-bucket']);
    for (const line of errors) expect(line).toMatchObject({ response: null, error: { code: 'image_fetch_failed' } });
    // One message whatever the reason, so nothing can be probed (test/images.test.ts).
    expect(errors.map((line) => line.error.message)).toEqual(
      [`s3://${bucket()}/images/nowhere.png`, `s3://${bucket()}/images/notes.txt`, 's3://no-such-bucket-here/cat.png'].map((url) => `The image ${url} could not be fetched`),
    );
  });

  it('answers an unfetchable image with a 400 on /compat/v1, and the image bytes steer the prompt', async () => {
    const compat = new OpenAI({ baseURL: `${service.url}/compat/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
    const ask = (url: string) =>
      compat.chat.completions.create({
        model: 'spool-tiny',
        max_tokens: 4,
        temperature: 0,
        messages: [{ role: 'user', content: [{ type: 'text', text: 'Look:' }, { type: 'image_url', image_url: { url } }] }],
      });
    await expect(ask(`s3://${bucket()}/images/nowhere.png`)).rejects.toMatchObject({ status: 400, code: 'image_fetch_failed' });
    const cat = await ask(`s3://${bucket()}/images/cat.png`);
    // "<|user|>\nLook:<|image|>" + 64 hex digits + "\n<|assistant|>\n", plus BOS.
    expect(cat.usage?.prompt_tokens).toBe(1 + Buffer.byteLength('<|user|>\nLook:<|image|>') + 64 + Buffer.byteLength('\n<|assistant|>\n'));
  });
});
