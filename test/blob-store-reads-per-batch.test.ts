import * as fs from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LocalBlobStore } from '../src/blob-store/local-blob-store.js';
import { chunkPartsPrefix } from '../src/domain/blob-keys.js';
import { chatLine, createBatch, reserveJob, waitForStatus, waitUntil } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { type WholeService, startTestService, tempDir } from './support/service.js';

// Every folder the local blob store opens, recorded here: a service's speed must not depend on how
// long it has run, so no step taken for one batch may read the folders of every batch ever kept.
const opened = vi.hoisted(() => [] as string[]);
vi.mock('node:fs/promises', async (original) => {
  const real = await original<typeof import('node:fs/promises')>();
  const opendir: typeof real.opendir = (path, options) => {
    opened.push(String(path));
    return real.opendir(path, options);
  };
  return { ...real, default: { ...real, opendir }, opendir };
});

/** How many of a batch's chunk parts are still on disk (they are removed once its files are written). */
async function partsLeft(root: string, batchId: string): Promise<number> {
  try {
    return (await fs.readdir(join(root, chunkPartsPrefix(batchId)))).length;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
}

const blobKeyOf = (root: string, path: string) => relative(root, path).split(sep).join('/');

describe('a list by prefix in the local blob store', () => {
  it('opens only the folders under the prefix, however many other batches are kept', async () => {
    const root = tempDir('blobs-by-prefix');
    const store = new LocalBlobStore(root);
    for (let batch = 0; batch < 20; batch++) {
      for (let chunk = 0; chunk < 3; chunk++) await store.put(`${chunkPartsPrefix(`batch_${batch}`)}${chunk}.output.jsonl`, Readable.from([Buffer.from('{}\n')]));
    }
    opened.length = 0;
    const keys: string[] = [];
    for await (const key of store.list(chunkPartsPrefix('batch_7'))) keys.push(key);
    expect(keys.sort()).toEqual([0, 1, 2].map((chunk) => `${chunkPartsPrefix('batch_7')}${chunk}.output.jsonl`));
    expect(opened.map((path) => blobKeyOf(root, path))).toEqual([chunkPartsPrefix('batch_7').slice(0, -1)]);
    // The whole store is still one walk from the root.
    opened.length = 0;
    let all = 0;
    for await (const _ of store.list('')) all += 1;
    expect(all).toBe(60);
    expect(opened.length).toBeGreaterThan(20);
  });
});

describe('the folders of the blob store a batch reads on its way', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let client: OpenAI;
  const JOB = { job_id: 'history-job', model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1 };

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({
      env: { ENGINE_BASE_URL: engine.url, ENGINE_MODELS: 'tiny-chat', BATCH_CHUNK_LINES: '2', BATCH_PROGRESS_LOG_SECONDS: '0' },
    });
    expect((await reserveJob(service.url, JOB)).status).toBe(201);
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
  });
  afterAll(async () => {
    await service?.close();
    await engine.stop();
  });

  const runBatch = async (index: number, count = 5) => {
    const lines = Array.from({ length: count }, (_, line) => chatLine(`b${index}-${line}`, `hello ${line}`));
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'input.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
    expect((await waitForStatus(client, batch.id, ['completed', 'failed', 'expired', 'cancelled'])).status).toBe('completed');
    return batch.id;
  };

  it('never opens the folder of another batch, nor the folder that holds them all', async () => {
    const root = join(service.dataDir, 'blobs');
    const earlier: string[] = [];
    for (let index = 0; index < 3; index++) earlier.push(await runBatch(index));
    // The last batch's parts are removed a moment after its status shows.
    await waitUntil(async () => (await partsLeft(root, earlier[2]!)) === 0, 30_000);
    opened.length = 0;
    const batchId = await runBatch(3);
    await waitUntil(async () => (await partsLeft(root, batchId)) === 0, 30_000);
    expect(await partsLeft(root, batchId)).toBe(0);
    const read = opened.filter((path) => path === root || path.startsWith(root + sep)).map((path) => blobKeyOf(root, path));
    // The batch's end lists its own parts (the one folder it reads), and nothing else.
    expect(read).toContain(chunkPartsPrefix(batchId).slice(0, -1));
    const elsewhere = read.filter((key) => !key.startsWith(`${chunkPartsPrefix(batchId).split('/').slice(0, 2).join('/')}`));
    expect(elsewhere, `folders read for ${batchId}: ${JSON.stringify(read)}`).toEqual([]);
  });

  it('opens no folder at all for a batch of one chunk, which has no parts', async () => {
    const root = join(service.dataDir, 'blobs');
    opened.length = 0;
    // Two lines: one chunk of BATCH_CHUNK_LINES.
    const batchId = await runBatch(10, 2);
    const download = await client.files.content((await client.batches.retrieve(batchId)).output_file_id!);
    expect((await download.text()).trim().split('\n')).toHaveLength(2);
    // A moment for the finalizer's steps after the status shows.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(opened.filter((path) => path === root || path.startsWith(root + sep))).toEqual([]);
  });
});
