import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { S3BlobStore } from '../src/blob-store/s3-blob-store.js';
import { createS3Client } from '../src/platform/s3-client.js';
import { BuiltinEngine } from '../src/engine/builtin/builtin-engine.js';
import { loadCheckpoint } from '../src/engine/builtin/checkpoint.js';
import { Transformer } from '../src/engine/builtin/transformer.js';
import type { RunningService } from '../src/service.js';
import { S3Proxy } from './support/s3-proxy.js';
import { batchProgress, createBatch, fileLines, waitFor, waitForStatus } from './support/batch-helpers.js';
import { TEST_API_KEY, startTestService, tempDir } from './support/service.js';
import { stageInS3 } from './support/staged-checkpoint.js';

const headers = { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' };
const question = { messages: [{ role: 'user' as const, content: 'Which weights are you?' }], max_tokens: 16, temperature: 0 };

describe('weight sync', () => {
  let target: string;
  let proxy: S3Proxy;
  let store: S3BlobStore;
  let service: RunningService & { dataDir: string };
  let env: Record<string, string>;
  let compat: OpenAI;
  const bucket = () => inject('s3Bucket');
  const folders: Record<string, string> = {};

  const post = (path: string, weights: Record<string, string>, auth = headers) =>
    fetch(`${service.url}/mgmt/v1/weights/${path}`, { method: 'POST', headers: auth, body: JSON.stringify({ weights }) });
  const status = async () => ((await (await fetch(`${service.url}/mgmt/v1/weights/status`, { headers })).json()) as { models: Record<string, any> }).models;
  const until = async (model: string, accept: (entry: any) => boolean, seen?: Set<string>) => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const entry = (await status())[model];
      seen?.add(entry.state);
      if (accept(entry)) return entry;
      if (Date.now() > deadline) throw new Error(`weights of ${model} never got there: ${JSON.stringify(entry)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const answer = async (model = 'spool-tiny') => (await compat.chat.completions.create({ model, ...question })).choices[0]!.message.content;
  const direct = async (folder: string) =>
    (((await new BuiltinEngine(new Transformer(loadCheckpoint(folder)), 'x').infer({ endpoint: '/v1/chat/completions', body: question })).body as any).choices[0].message.content as string);
  const shardBodyReads = (prefix: string) =>
    proxy.seen.filter((request) => request.method === 'GET' && request.path.includes(prefix) && request.path.endsWith('.safetensors') && request.range !== 'bytes=0-7' && !/^bytes=8-/.test(request.range ?? ''));

  beforeAll(async () => {
    target = inject('s3Endpoint');
    process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
    process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
    proxy = new S3Proxy(target);
    await proxy.start();
    store = new S3BlobStore(createS3Client({ endpoint: target, forcePathStyle: true }), { bucket: bucket(), prefix: 'checkpoints' });
    folders.seed1 = await stageInS3(store, 'seed1', ['--seed', '1', '--shards', '3']);
    folders.seed2 = await stageInS3(store, 'seed2', ['--seed', '2']);
    folders.deeper = await stageInS3(store, 'deeper', ['--seed', '1', '--layers', '3']);
    folders.int8 = await stageInS3(store, 'int8', ['--seed', '1', '--quantize', 'int8']);
    const fleetFile = join(tempDir('fleet'), 'fleet.json');
    writeFileSync(fleetFile, JSON.stringify({ models: { 'spool-tiny': { replicas: [{ kind: 'builtin' }, { kind: 'builtin' }] }, 'spool-other': { replicas: [{ kind: 'builtin' }] } } }));
    env = {
        FLEET_FILE: fleetFile,
        AWS_ENDPOINT_URL_S3: proxy.url,
        AWS_ACCESS_KEY_ID: 'S3RVER',
        AWS_SECRET_ACCESS_KEY: 'S3RVER',
        AWS_REGION: 'us-east-1',
        S3_FORCE_PATH_STYLE: 'true',
        WEIGHT_SYNC_RETRY_MS: '20',
    };
    service = await startTestService({ env });
    compat = new OpenAI({ baseURL: `${service.url}/compat/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
  });
  afterAll(async () => {
    await service.close();
    await proxy.stop();
  });

  it('refuses bad requests clearly', async () => {
    expect((await post('upload', { 'spool-tiny': `s3://${bucket()}/checkpoints/seed1/` }, { 'content-type': 'application/json' } as typeof headers)).status).toBe(401);
    const unknown = await post('upload', { 'no-such-model': `s3://${bucket()}/checkpoints/seed1/` });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as any).error.param).toBe('weights.no-such-model');
    const badLocation = await post('upload', { 'spool-tiny': 'https://example.com/weights' });
    expect(badLocation.status).toBe(400);
    expect(((await post('upload', { 'spool-tiny': `s3://${bucket()}/checkpoints/seed1` })).status)).toBe(400);
    const nothingStaged = await post('reload', { 'spool-tiny': `s3://${bucket()}/checkpoints/seed1/` });
    expect(nothingStaged.status).toBe(400);
    expect(((await nothingStaged.json()) as any).error.message).toContain('Nothing is staged');
    // An upload while one runs for the same model is a conflict.
    const first = await post('upload', { 'spool-tiny': `s3://${bucket()}/checkpoints/seed1/` });
    const second = await post('upload', { 'spool-tiny': `s3://${bucket()}/checkpoints/seed1/` });
    expect(first.status).toBe(202);
    expect(second.status).toBe(409);
    await until('spool-tiny', (entry) => entry.state !== 'uploading');
  });

  it('stages, reloads with no failed request under load, and then serves the new weights', async () => {
    const before = await answer();
    const location = `s3://${bucket()}/checkpoints/seed1/`;
    const accepted = await post('upload', { 'spool-tiny': location });
    expect(accepted.status).toBe(202);
    const states = new Set<string>();
    const staged = await until('spool-tiny', (entry) => entry.state === 'ready' && entry.staged !== null, states);
    expect(states.has('uploading') || (await service.eventStore.readAll({ maxCount: 10_000 })).some((event) => event.type === 'WeightsStaged')).toBe(true);
    expect(staged.staged.checkpoint).toBe(location);
    expect(staged.staged.files.map((file: { name: string }) => file.name).sort()).toEqual(readdirSync(folders.seed1!).sort());
    for (const file of staged.staged.files) expect(file.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(await answer()).toBe(before); // serving is unchanged until the reload

    // A steady stream of requests while the two replicas swap: none may fail.
    let running = true;
    let sent = 0;
    const failures: unknown[] = [];
    const load = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (running) {
          sent += 1;
          await answer().catch((error: unknown) => failures.push(error));
        }
      }),
    );
    const sentAtLeast = async (count: number) => {
      while (sent < count) await new Promise((resolve) => setTimeout(resolve, 5));
    };
    await sentAtLeast(8);
    expect((await post('reload', { 'spool-tiny': location })).status).toBe(202);
    const ready = await until('spool-tiny', (entry) => entry.state === 'ready' && entry.serving.checkpoint === location);
    await sentAtLeast(sent + 8);
    running = false;
    await load;
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThanOrEqual(16);
    expect(ready.replicas.map((replica: { checkpoint: string }) => replica.checkpoint)).toEqual([location, location]);
    expect(ready.serving.since).toEqual(expect.any(Number));
    expect(ready.staged).toBeNull();

    const after = await answer();
    expect(after).not.toBe(before);
    expect(after).toBe(await direct(folders.seed1!));
    const all = (await service.eventStore.readAll({ maxCount: 10_000 })).filter((event) => event.streamName === 'weights-spool-tiny').map((event) => event.type);
    const types = all.slice(all.lastIndexOf('WeightsUploadRequested'));
    expect(types).toEqual(['WeightsUploadRequested', 'CheckpointValidated', 'WeightsStaged', 'WeightsReloadRequested', 'ReplicaReloaded', 'ReplicaReloaded', 'WeightsReloaded']);
    // The same history through the audit endpoint.
    const audit = (await (await fetch(`${service.url}/mgmt/v1/weights/spool-tiny/events?limit=1000`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).json()) as { data: Array<{ type: string; stream: string }>; has_more: boolean };
    expect(audit.has_more).toBe(false);
    expect(audit.data.map((event) => event.type)).toEqual(all);
    expect(new Set(audit.data.map((event) => event.stream))).toEqual(new Set(['weights-spool-tiny']));

    // A restart serves the last reloaded weights, not the checkpoint the fleet started from.
    const dataDir = service.dataDir;
    await service.close();
    service = await startTestService({ dataDir, env });
    compat = new OpenAI({ baseURL: `${service.url}/compat/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
    expect(await answer()).toBe(after);
    expect((await status())['spool-tiny'].replicas.map((replica: { checkpoint: string }) => replica.checkpoint)).toEqual([location, location]);
  });

  it('rejects another architecture and another quantization from the headers alone, before any shard body is read', async () => {
    for (const [prefix, kind] of [['deeper', 'architecture'], ['int8', 'quantization']] as const) {
      const served = await answer();
      const seenBefore = proxy.seen.length;
      expect((await post('upload', { 'spool-tiny': `s3://${bucket()}/checkpoints/${prefix}/` })).status).toBe(202);
      const failed = await until('spool-tiny', (entry) => entry.state === 'failed');
      expect(failed.sync.last_error).toContain(`${kind} differs`);
      expect(failed.sync.last_error).toContain('needs a new deployment');
      const reads = proxy.seen.slice(seenBefore);
      expect(reads.filter((request) => request.method === 'GET' && request.path.endsWith('.safetensors')).length).toBeGreaterThan(0);
      expect(shardBodyReads(`/${prefix}/`)).toEqual([]);
      expect(await answer()).toBe(served);
    }
  });

  it('retries a transient S3 failure, and reports a permanent one failed after three attempts, serving throughout', async () => {
    const served = await answer();
    proxy.failWhen = (request) => request.method === 'GET' && request.path.includes('/seed2/') && request.path.endsWith('.safetensors') && request.range !== 'bytes=0-7' && !/^bytes=8-/.test(request.range ?? '');
    proxy.failures = 4; // more than the SDK's own three tries: one attempt of ours fails
    expect((await post('upload', { 'spool-tiny': `s3://${bucket()}/checkpoints/seed2/` })).status).toBe(202);
    await until('spool-tiny', (entry) => entry.state === 'ready' && entry.staged?.checkpoint === `s3://${bucket()}/checkpoints/seed2/`);
    const events = (await service.eventStore.readAll({ maxCount: 10_000 })).filter((event) => event.streamName === 'weights-spool-tiny').map((event) => event.type);
    const sync = events.slice(events.lastIndexOf('WeightsUploadRequested'));
    // The failed attempt is recorded, and the next one validates again (the object may have changed) and stages.
    expect(sync).toEqual(['WeightsUploadRequested', 'CheckpointValidated', 'WeightSyncAttemptFailed', 'CheckpointValidated', 'WeightsStaged']);

    proxy.failures = -1;
    const failed = [];
    expect((await post('upload', { 'spool-tiny': `s3://${bucket()}/checkpoints/seed2/` })).status).toBe(202);
    const ended = await until('spool-tiny', (entry) => {
      return entry.state === 'failed';
    });
    proxy.failWhen = undefined;
    expect(ended.sync.attempt).toBe(3);
    expect(ended.sync.max_attempts).toBe(3);
    expect(ended.sync.last_error.length).toBeGreaterThan(0);
    const tail = (await service.eventStore.readAll({ maxCount: 10_000 })).filter((event) => event.streamName === 'weights-spool-tiny').map((event) => event.type);
    const lastSync = tail.slice(tail.lastIndexOf('WeightsUploadRequested'));
    expect(lastSync.filter((type) => type === 'WeightSyncAttemptFailed')).toHaveLength(3);
    expect(lastSync.at(-1)).toBe('WeightSyncFailed');
    expect(lastSync).not.toContain('WeightsStaged');
    failed.push(await answer());
    expect(failed[0]).toBe(served);
  });

  it('handles several models in one call, each on its own', async () => {
    const response = await post('upload', { 'spool-other': `s3://${bucket()}/checkpoints/seed2/`, 'spool-tiny': `s3://${bucket()}/checkpoints/deeper/` });
    expect(response.status).toBe(202);
    const body = (await response.json()) as { results: Record<string, { accepted: boolean }> };
    expect(body.results['spool-other']?.accepted).toBe(true);
    expect(body.results['spool-tiny']?.accepted).toBe(true);
    const other = await until('spool-other', (entry) => entry.state === 'ready' && entry.staged !== null);
    const tiny = await until('spool-tiny', (entry) => entry.state === 'failed');
    expect(other.staged.checkpoint).toContain('/seed2/');
    expect(tiny.sync.last_error).toContain('architecture differs');
  });

  it('names the weights that answered each line of a batch that runs across a reload: in its events, its output lines when asked, its counts and its end', async () => {
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    // Staged before the batch starts; reloaded while it runs.
    const location = `s3://${bucket()}/checkpoints/seed2/`;
    expect((await post('upload', { 'spool-tiny': location })).status).toBe(202);
    await until('spool-tiny', (entry) => entry.state === 'ready' && entry.staged?.checkpoint === location);
    const total = 300;
    const lines = Array.from({ length: total }, (_, index) => JSON.stringify({ custom_id: `q-${index}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'spool-tiny', ...question, max_tokens: 48 } }));
    const input = await client.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'lines.jsonl'), purpose: 'batch' });
    const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-demo', metadata: { spool_served_by: 'true' } });
    await waitFor(async () => (await batchProgress(client, created.id)) >= 0.1, 'a tenth of the lines answered', 60_000);
    expect((await post('reload', { 'spool-tiny': location })).status).toBe(202);
    const reloaded = await until('spool-tiny', (entry) => entry.state === 'ready' && entry.staged === null && entry.serving.checkpoint === location);
    const syncId = reloaded.sync.id as string;
    const done = await waitForStatus(client, created.id, ['completed', 'failed', 'expired', 'cancelled'], 120_000);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toMatchObject({ total, completed: total });

    // Each output line names its replica and weights (the batch asked for it).
    const output = await fileLines(client, done.output_file_id);
    expect(output).toHaveLength(total);
    const after = output.filter((line) => line.served_by.sync_id === syncId);
    expect(after.length, 'lines answered after the reload').toBeGreaterThan(0);
    expect(after.length, 'lines answered before it').toBeLessThan(total);
    for (const line of after) expect(line.served_by).toEqual({ replica: expect.stringMatching(/^spool-tiny\/[01]$/), checkpoint: location, sync_id: syncId });
    for (const line of output.filter((entry) => entry.served_by.sync_id !== syncId)) expect(line.served_by.replica).toMatch(/^spool-tiny\/[01]$/);

    // The counts per checkpoint and sync: the lines' own, summing to the batch.
    const view = (await (await fetch(`${service.url}/v1/batches/${created.id}/served_by`)).json()) as { data: Array<{ object: string; checkpoint: string; sync_id: string | null; lines: number }> };
    expect(view.data.reduce((sum, entry) => sum + entry.lines, 0)).toBe(total);
    expect(view.data.find((entry) => entry.sync_id === syncId)).toEqual({ object: 'batch.served_by', checkpoint: location, sync_id: syncId, lines: after.length });

    // The audit trail: every outcome event says it, and the batch's end carries the counts (the batch-events topic publishes it).
    const events = await service.eventStore.readAll({ maxCount: 100_000 });
    const outcomes = events.filter((event) => event.type === 'LineCompleted' && (event.data as { batch_id: string }).batch_id === created.id);
    expect(outcomes).toHaveLength(total);
    expect(outcomes.filter((event) => (event.data as { served_by: { sync_id?: string } }).served_by.sync_id === syncId)).toHaveLength(after.length);
    const completed = events.find((event) => event.type === 'BatchCompleted' && (event.data as { batch_id: string }).batch_id === created.id)!;
    expect((completed.data as { served_by: unknown }).served_by).toEqual(view.data.map(({ object: _object, ...entry }) => entry));

    // A batch that does not ask keeps OpenAI's line shape.
    const plain = await createBatch(client, { input_file_id: (await client.files.create({ file: await toFile(Buffer.from(`${lines[0]}\n`), 'one.jsonl'), purpose: 'batch' })).id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-demo' });
    const plainDone = await waitForStatus(client, plain.id, ['completed'], 60_000);
    expect(Object.keys((await fileLines(client, plainDone.output_file_id))[0]!)).toEqual(['id', 'custom_id', 'response', 'error']);
  });

  it('reloads HTTP replicas through their own endpoints: SGLang update_weights_from_disk, vLLM pause, reload_weights, resume', async () => {
    const { FakeEngine } = await import('./support/fake-engine.js');
    const vllm = new FakeEngine();
    const sglang = new FakeEngine();
    await vllm.start();
    await sglang.start();
    const fleetFile = join(tempDir('fleet-http'), 'fleet.json');
    writeFileSync(fleetFile, JSON.stringify({ models: { remote: { replicas: [{ kind: 'vllm', base_url: vllm.url }, { kind: 'sglang', base_url: sglang.url }] } } }));
    const remote = await startTestService({
      env: { FLEET_FILE: fleetFile, AWS_ENDPOINT_URL_S3: proxy.url, AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', S3_FORCE_PATH_STYLE: 'true' },
    });
    try {
      const call = (path: string) => fetch(`${remote.url}/mgmt/v1/weights/${path}`, { method: 'POST', headers, body: JSON.stringify({ weights: { remote: `s3://${bucket()}/checkpoints/seed2/` } }) });
      const read = async () => ((await (await fetch(`${remote.url}/mgmt/v1/weights/status`, { headers })).json()) as { models: Record<string, any> }).models.remote;
      const wait = async (accept: (entry: any) => boolean) => {
        for (let polls = 0; polls < 1500; polls++) {
          const entry = await read();
          if (accept(entry)) return entry;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        throw new Error(JSON.stringify(await read()));
      };
      expect((await call('upload')).status).toBe(202);
      const staged = await wait((entry) => entry.staged !== null);
      expect((await call('reload')).status).toBe(202);
      await wait((entry) => entry.state === 'ready' && entry.serving.checkpoint === `s3://${bucket()}/checkpoints/seed2/`);
      expect(sglang.adminCalls).toEqual([{ path: '/update_weights_from_disk', body: JSON.stringify({ model_path: staged.staged.path }) }]);
      expect(vllm.adminCalls.map((entry) => entry.path)).toEqual(['/pause?mode=wait', '/collective_rpc', '/resume']);
      expect(JSON.parse(vllm.adminCalls[1]!.body)).toEqual({ method: 'reload_weights', kwargs: { weights_path: staged.staged.path } });

      // From now on the checkpoint synced onto them is what the HTTP replicas serve: another architecture is refused.
      const deeper = await fetch(`${remote.url}/mgmt/v1/weights/upload`, { method: 'POST', headers, body: JSON.stringify({ weights: { remote: `s3://${bucket()}/checkpoints/deeper/` } }) });
      expect(deeper.status).toBe(202);
      const refused = await wait((entry) => entry.state === 'failed');
      expect(refused.sync.last_error).toContain('architecture differs');
      expect(sglang.adminCalls).toHaveLength(1);
    } finally {
      await remote.close();
      await vllm.stop();
      await sglang.stop();
    }
  });
});
