import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startSpoolCli, stop, unusedPort, waitForReady } from './support/processes.js';
import { S3BlobStore } from '../src/blob-store/s3-blob-store.js';
import { createS3Client } from '../src/platform/s3-client.js';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { S3Proxy } from './support/s3-proxy.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir } from './support/service.js';


const MIB = 1024 * 1024;
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const png = (text: string, size = 0) => {
  const bytes = Buffer.concat([PNG_SIGNATURE, Buffer.from(text)]);
  return size > bytes.length ? Buffer.concat([bytes, Buffer.alloc(size - bytes.length, 7)]) : bytes;
};
/** A second bucket: images live apart from Spool's own storage. */
const IMAGES_BUCKET = 'spool-images';
const S3_SECRETS = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1' };

/** The one message every unfetchable image gets, whatever the reason: nothing can be probed. */
const neutral = (url: string) => `The image ${url} could not be fetched`;

const imageLine = (id: string, urls: string[], model = 'spool-tiny', text = 'What is this?') =>
  chatLine(id, '', {
    body: {
      model,
      max_tokens: 2,
      messages: [{ role: 'user', content: [{ type: 'text', text }, ...urls.map((url) => ({ type: 'image_url', image_url: { url } }))] }],
    },
  });

async function runBatch(client: OpenAI, lines: string[], jobId = 'job-demo', timeoutMs = 60_000) {
  const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'images.jsonl'), purpose: 'batch' });
  const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: jobId });
  return { id: created.id, done: waitForStatus(client, created.id, ['completed', 'failed'], timeoutMs) };
}

async function outcomes(client: OpenAI, lines: string[], jobId?: string) {
  const done = await (await runBatch(client, lines, jobId)).done;
  expect(done.status).toBe('completed');
  const output = await fileLines(client, done.output_file_id);
  const errors = await fileLines(client, done.error_file_id);
  return { completed: output.map((line) => line.custom_id as string), errors: new Map(errors.map((line) => [line.custom_id as string, line])) };
}


let images: S3BlobStore;
beforeAll(async () => {
  const client = createS3Client({ endpoint: inject('s3Endpoint'), forcePathStyle: true });
  Object.assign(process.env, S3_SECRETS);
  await client.send(new CreateBucketCommand({ Bucket: IMAGES_BUCKET })).catch((error: { name?: string }) => {
    if (error.name !== 'BucketAlreadyOwnedByYou' && error.name !== 'BucketAlreadyExists') throw error;
  });
  images = new S3BlobStore(client, { bucket: IMAGES_BUCKET, prefix: '' });
  await images.put('cat.png', Readable.from([png('a cat')]));
  await images.put('notes.txt', Readable.from([Buffer.from('not an image at all')]));
  await images.put('big.png', Readable.from([png('a very large picture', 24 * MIB)]));
  for (let index = 0; index < 8; index++) await images.put(`photo-${index}.png`, Readable.from([png(`photo ${index}`, 4 * MIB)]));
  const ownBucket = new S3BlobStore(client, { bucket: inject('s3Bucket'), prefix: 'elsewhere' });
  await ownBucket.put('cat.png', Readable.from([png('a cat in the service bucket')]));
});

describe('s3:// images and Spool’s own storage (BLOB_STORE in S3, IMAGE_BUCKETS unset)', () => {
  const proxy = new S3Proxy(inject('s3Endpoint'));
  let service: WholeService;
  let client: OpenAI;
  const ownBucket = () => inject('s3Bucket');

  beforeAll(async () => {
    await proxy.start();
    service = await startTestService({
      env: {
        ...S3_SECRETS,
        BLOB_STORE: `s3://${ownBucket()}/own-store`,
        AWS_ENDPOINT_URL_S3: proxy.url,
        S3_FORCE_PATH_STYLE: 'true',
        IMAGE_MAX_BYTES: String(MIB),
      },
    });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
  });
  afterAll(async () => {
    await service?.close();
    await proxy.stop();
  });

  it('never reads another client’s upload, nor anything else in the blob store’s bucket, and says only that the image could not be fetched', async () => {
    // Another client's file, whose content happens to be a picture.
    const theirs = await client.files.create({ file: await toFile(png('someone else’s private picture'), 'private.png'), purpose: 'vision' });
    const theirKey = `own-store/files/${theirs.id}`;
    const urls = {
      upload: `s3://${ownBucket()}/${theirKey}`,
      sameBucket: `s3://${ownBucket()}/elsewhere/cat.png`,
      allowed: `s3://${IMAGES_BUCKET}/cat.png`,
    };
    const result = await outcomes(client, [imageLine('their-upload', [urls.upload]), imageLine('same-bucket', [urls.sameBucket]), imageLine('other-bucket', [urls.allowed])]);
    expect(result.completed).toEqual(['other-bucket']);
    expect(result.errors.get('their-upload')).toMatchObject({ response: null, error: { code: 'image_fetch_failed', message: neutral(urls.upload) } });
    expect(result.errors.get('same-bucket')).toMatchObject({ response: null, error: { code: 'image_fetch_failed', message: neutral(urls.sameBucket) } });
    // Not a byte of either object was asked for.
    const gets = proxy.seen.filter((request) => request.method === 'GET').map((request) => request.path);
    expect(gets).not.toContain(`/${ownBucket()}/${theirKey}`);
    expect(gets).not.toContain(`/${ownBucket()}/elsewhere/cat.png`);
    expect(gets).toContain(`/${IMAGES_BUCKET}/cat.png`);
  });

  it('gives the same message for a missing object, a missing bucket, a non-image and an image over IMAGE_MAX_BYTES, and stops reading an oversized one early', async () => {
    const urls = {
      missing: `s3://${IMAGES_BUCKET}/nowhere.png`,
      noBucket: 's3://no-such-bucket-here/cat.png',
      notImage: `s3://${IMAGES_BUCKET}/notes.txt`,
      tooLarge: `s3://${IMAGES_BUCKET}/big.png`,
      malformed: 's3://Not_A_Bucket/cat.png',
    };
    const result = await outcomes(client, Object.entries(urls).map(([id, url]) => imageLine(id, [url])));
    expect(result.completed).toEqual([]);
    for (const [id, url] of Object.entries(urls)) {
      const line = result.errors.get(id)!;
      expect(line.error, id).toEqual({ code: 'image_fetch_failed', message: neutral(url) });
      expect(JSON.stringify(line)).not.toContain(proxy.url.replace('http://', ''));
    }
    // 24 MiB stored, 1 MiB allowed: the fetch stopped near the limit, not at the object's end.
    expect(proxy.bytesServed.get(`/${IMAGES_BUCKET}/big.png`) ?? 0).toBeLessThan(2 * MIB);
  });
});

describe('IMAGE_BUCKETS: an allow-list of buckets', () => {
  let service: WholeService;
  let client: OpenAI;

  beforeAll(async () => {
    service = await startTestService({ env: { ...S3_SECRETS, AWS_ENDPOINT_URL_S3: inject('s3Endpoint'), S3_FORCE_PATH_STYLE: 'true', IMAGE_BUCKETS: ` ${IMAGES_BUCKET} , another-bucket` } });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
  });
  afterAll(async () => {
    await service?.close();
  });

  it('fetches from a listed bucket and refuses any other with the same neutral message', async () => {
    const elsewhere = `s3://${inject('s3Bucket')}/elsewhere/cat.png`;
    const result = await outcomes(client, [imageLine('listed', [`s3://${IMAGES_BUCKET}/cat.png`]), imageLine('not-listed', [elsewhere])]);
    expect(result.completed).toEqual(['listed']);
    expect(result.errors.get('not-listed')).toMatchObject({ error: { code: 'image_fetch_failed', message: neutral(elsewhere) } });
  });
});

describe('images are fetched once a line holds an engine slot; engine errors name no address', () => {
  const narrow = new FakeEngine();
  const wide = new FakeEngine();
  const proxy = new S3Proxy(inject('s3Endpoint'));
  let service: WholeService;
  let client: OpenAI;
  let deadPort: number;

  beforeAll(async () => {
    await Promise.all([narrow.start(), wide.start(), proxy.start()]);
    deadPort = await unusedPort();
    const fleetFile = join(tempDir('images-fleet'), 'fleet.json');
    writeFileSync(
      fleetFile,
      JSON.stringify({
        models: {
          'narrow-chat': { replicas: [{ kind: 'vllm', base_url: narrow.url, concurrency: 1 }] },
          'wide-chat': { replicas: [{ kind: 'vllm', base_url: wide.url, concurrency: 8 }] },
        },
      }),
    );
    service = await startTestService({
      env: {
        ...S3_SECRETS,
        AWS_ENDPOINT_URL_S3: proxy.url,
        S3_FORCE_PATH_STYLE: 'true',
        FLEET_FILE: fleetFile,
        IMAGE_FETCH_CONCURRENCY: '1',
        ENGINE_BASE_URL: `http://127.0.0.1:${deadPort}/v1`,
        ENGINE_MODELS: 'gone-model',
        ENGINE_MAX_ATTEMPTS: '2',
        ENGINE_BACKOFF_MS: '10',
      },
    });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    for (const model of ['narrow-chat', 'wide-chat', 'gone-model']) {
      expect((await reserveJob(service.url, { job_id: `${model}-job`, model, use_case: 'images', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
    }
  });
  afterAll(async () => {
    await service?.close();
    await Promise.all([narrow.stop(), wide.stop(), proxy.stop()]);
  });

  const imageGets = (prefix: string) => proxy.seen.filter((request) => request.method === 'GET' && request.path.startsWith(`/${IMAGES_BUCKET}/${prefix}`)).length;

  it('with one engine slot, fetches one line’s image while the engine holds the line before it', async () => {
    narrow.latencyMs = 400;
    const lines = Array.from({ length: 4 }, (_, index) => imageLine(`slot-${index}`, [`s3://${IMAGES_BUCKET}/photo-${index}.png`], 'narrow-chat'));
    const { done } = await runBatch(client, lines, 'narrow-chat-job');
    while (narrow.total === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    // The first line is at the engine for 400 ms; the other three wait for its slot, imageless.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(imageGets('photo-')).toBe(1);
    expect((await done).request_counts).toEqual({ completed: 4, failed: 0, total: 4 });
    expect(imageGets('photo-')).toBe(4);
  });

  it('holds at most IMAGE_FETCH_CONCURRENCY image fetches at once, however many lines hold a slot', async () => {
    wide.latencyMs = 0;
    proxy.maxInFlight.set('GET', 0);
    const lines = Array.from({ length: 8 }, (_, index) => imageLine(`wide-${index}`, [`s3://${IMAGES_BUCKET}/photo-${index}.png`], 'wide-chat'));
    const done = await (await runBatch(client, lines, 'wide-chat-job')).done;
    expect(done.request_counts).toEqual({ completed: 8, failed: 0, total: 8 });
    expect(proxy.maxInFlight.get('GET')).toBe(1);
  });

  it('an engine_unavailable line error names neither the engine’s URL nor its address', async () => {
    const result = await outcomes(client, [chatLine('unreachable', 'hello', { body: { model: 'gone-model', messages: [{ role: 'user', content: 'hello' }] } })], 'gone-model-job');
    const line = result.errors.get('unreachable')!;
    expect(line.error.code).toBe('engine_unavailable');
    expect(line.error.message).toContain('gone-model');
    for (const leak of ['127.0.0.1', String(deadPort), 'http', 'ECONNREFUSED']) expect(line.error.message).not.toContain(leak);
  });
});

describe('with S3 path-style addressing off', () => {
  let spool: { child: ChildProcess; url: string } | undefined;
  let stderr = '';

  beforeAll(async () => {
    spool = await startSpoolCli(['serve'], {
      ...S3_SECRETS,
      PORT: '0',
      DATA_DIR: tempDir('images-cli'),
      API_KEY: TEST_API_KEY,
      AWS_ENDPOINT_URL_S3: inject('s3Endpoint'),
      S3_FORCE_PATH_STYLE: 'false',
    });
    spool.child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await waitForReady(spool.url, 60_000);
  });
  afterAll(async () => {
    if (spool) await stop(spool.child);
  });

  it('a bucket name that cannot be a host name fails its line quietly: no stack trace on stderr, no endpoint in the message', async () => {
    const client = new OpenAI({ baseURL: `${spool!.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const urls = ['s3://has.dots/cat.png', 's3://arn:aws:s3-object-lambda:us-east-1:123456789012:accesspoint/x/cat.png'];
    const result = await outcomes(client, urls.map((url, index) => imageLine(`odd-${index}`, [url])));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(stderr).not.toMatch(/Failed to construct URL|\n\s+at /);
    expect(stderr).toBe('');
    urls.forEach((url, index) => expect(result.errors.get(`odd-${index}`)?.error).toEqual({ code: 'image_fetch_failed', message: neutral(url) }));
  });
});
