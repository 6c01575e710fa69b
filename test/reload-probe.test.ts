import { execFileSync } from 'node:child_process';
import { createReadStream, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { S3BlobStore } from '../src/blob-store/s3-blob-store.js';
import type { TextDelta } from '../src/engine/builtin/builtin-engine.js';
import { BuiltinEngine } from '../src/engine/builtin/builtin-engine.js';
import { DEFAULT_CHECKPOINT, createCheckpoint } from '../src/engine/builtin/checkpoint.js';
import type { EngineRequest, EngineResponse } from '../src/engine/engine.js';
import { Fleet } from '../src/engine/fleet.js';
import { BuiltinReplica, type StagedWeights, sharedWeights } from '../src/engine/replica.js';
import { ReplicaPool } from '../src/engine/replica-pool.js';
import { packageRoot } from '../src/platform/package-root.js';
import { createS3Client } from '../src/platform/s3-client.js';
import { FakeEngine } from './support/fake-engine.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir } from './support/service.js';

// Real engines have known reload failures: an answer gone wrong (gibberish after a sleep/wake
// cycle), weights that did not change, an engine that hangs or stays paused. Each stand-in below is
// a built-in replica whose reload goes wrong in one of those ways, on purpose; the weight sync must
// catch it with its probe, put the replica back on its earlier weights, record the sync failed with
// the reason, and never let a user request meet the bad weights.

type Fault = 'wrong answer' | 'stale weights' | 'hangs' | 'stays paused';

const question = { model: 'spool-tiny', messages: [{ role: 'user' as const, content: 'Which weights are you?' }], max_tokens: 16, temperature: 0 };

class MisbehavingReplica extends BuiltinReplica {
  private broken = false;

  constructor(
    private readonly own: string,
    private readonly fault: Fault,
    private readonly gibberish: string,
  ) {
    super('spool-tiny/0', new BuiltinEngine(sharedWeights(own), 'spool-tiny'), own);
  }

  override async reload(weights: StagedWeights): Promise<void> {
    await super.reload(weights);
    // Its own folder again is the sync putting it back: that reload works.
    this.broken = weights.path !== this.own;
    if (!this.broken) return;
    if (this.fault === 'wrong answer') this.engine.swap(sharedWeights(this.gibberish));
    if (this.fault === 'stale weights') this.engine.swap(sharedWeights(this.own));
  }

  override send(request: EngineRequest, onDelta?: TextDelta): Promise<EngineResponse> {
    if (this.broken && this.fault === 'hangs') {
      return new Promise((_resolve, reject) => request.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
    }
    if (this.broken && this.fault === 'stays paused') return Promise.resolve({ statusCode: 503, requestId: 'paused', body: { error: { message: 'the engine is paused' } } });
    return super.send(request, onDelta);
  }
}

const headers = { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' };

/** A model's weight-sync status on the service at `url()`, and a wait until it is as `accept` wants (60 s at most). */
function weightSyncOf(url: () => string, model: string) {
  const status = async () => ((await (await fetch(`${url()}/mgmt/v1/weights/status`, { headers })).json()) as { models: Record<string, any> }).models[model];
  const until = async (accept: (entry: any) => boolean) => {
    for (const deadline = Date.now() + 60_000; ; ) {
      const entry = await status();
      if (accept(entry)) return entry;
      if (Date.now() > deadline) throw new Error(`never got there: ${JSON.stringify(entry)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  return { until };
}

describe('a reload that is checked, and undone when bad', () => {
  let location: string;
  let own: string;
  let gibberish: string;
  const bucket = () => inject('s3Bucket');

  beforeAll(async () => {
    process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
    process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
    const store = new S3BlobStore(createS3Client({ endpoint: inject('s3Endpoint'), forcePathStyle: true }), { bucket: bucket(), prefix: 'probe-checkpoints' });
    const folder = join(tempDir('ckpt'), 'seed1');
    execFileSync(process.execPath, [join(packageRoot, 'dist/src/process/cli.js'), 'checkpoint', 'create', '--out', folder, '--seed', '1']);
    for (const name of readdirSync(folder)) await store.put(`seed1/${name}`, createReadStream(join(folder, name)));
    location = `s3://${bucket()}/probe-checkpoints/seed1/`;
    own = join(tempDir('ckpt'), 'own');
    createCheckpoint(own, { ...DEFAULT_CHECKPOINT, seed: 0 });
    gibberish = join(tempDir('ckpt'), 'gibberish');
    createCheckpoint(gibberish, { ...DEFAULT_CHECKPOINT, seed: 99 });
  });

  const expectations: Array<[Fault, RegExp]> = [
    ['wrong answer', /spool-tiny\/0: the probe was answered ".*", where the checkpoint loaded directly answers ".*"/],
    ['stale weights', /spool-tiny\/0: the probe was answered ".*", where the checkpoint loaded directly answers ".*"/],
    ['hangs', /spool-tiny\/0: the probe had no answer within 1 s/],
    ['stays paused', /spool-tiny\/0: the probe was answered 503/],
  ];

  for (const [fault, reason] of expectations) {
    describe(`a replica that ${fault} after its reload`, () => {
      let service: WholeService;
      let compat: OpenAI;
      const { until } = weightSyncOf(() => service.url, 'spool-tiny');
      const answer = async () => (await compat.chat.completions.create(question)).choices[0]!.message.content;

      beforeAll(async () => {
        const replica = new MisbehavingReplica(own, fault, gibberish);
        const fleet = new Fleet(new Map([['spool-tiny', new ReplicaPool('spool-tiny', [{ replica, concurrency: 2 }], { maxAttempts: 3, backoffMs: 10, cooldownMs: 1000 })]]));
        service = await startTestService({
          fleet,
          env: { AWS_ENDPOINT_URL_S3: inject('s3Endpoint'), AWS_REGION: 'us-east-1', S3_FORCE_PATH_STYLE: 'true', WEIGHT_SYNC_RETRY_MS: '20', WEIGHT_SYNC_PROBE_TIMEOUT_SECONDS: '1' },
        });
        compat = new OpenAI({ baseURL: `${service.url}/compat/v1`, apiKey: TEST_API_KEY, maxRetries: 0, timeout: 60_000 });
      });
      afterAll(async () => {
        await service?.close();
      });

      it('is caught by the probe, put back on its earlier weights, recorded failed with the reason, and never serves a user', async () => {
        const before = await answer();
        const post = (step: string) => fetch(`${service.url}/mgmt/v1/weights/${step}`, { method: 'POST', headers, body: JSON.stringify({ weights: { 'spool-tiny': location } }) });
        expect((await post('upload')).status).toBe(202);
        await until((entry) => entry.state === 'ready' && entry.staged?.checkpoint === location);

        // Users keep asking throughout the reload and its undoing: every answer is the earlier weights'.
        let asking = true;
        const answers: Array<string | null> = [];
        const users = Promise.all(
          Array.from({ length: 3 }, async () => {
            while (asking) answers.push(await answer());
          }),
        );
        expect((await post('reload')).status).toBe(202);
        const failed = await until((entry) => entry.state === 'failed');
        asking = false;
        await users;
        expect(answers.length).toBeGreaterThan(0);
        expect(new Set(answers)).toEqual(new Set([before]));

        expect(failed.sync.last_error).toMatch(reason);
        expect(failed.serving.checkpoint).toBe('initial');
        expect(await answer()).toBe(before);
        // The audit trail says why, attempt by attempt, and that the sync failed.
        const events = (await service.eventStore.readAll({ maxCount: 10_000 })).filter((event) => event.streamName === 'weights-spool-tiny');
        const attempts = events.filter((event) => event.type === 'WeightSyncAttemptFailed');
        expect(attempts.length).toBeGreaterThanOrEqual(1);
        for (const attempt of attempts) expect(String((attempt.data as { error: string }).error)).toMatch(reason);
        expect(events.at(-1)!.type).toBe('WeightSyncFailed');
        expect(events.some((event) => event.type === 'WeightsReloaded')).toBe(false);
      });
    });
  }

  describe("on a vLLM server (a stand-in: no GPU here), whose earlier weights are the last sync's", () => {
    let engine: FakeEngine;
    let service: WholeService;
    const { until } = weightSyncOf(() => service.url, 'remote');
    const sync = async (checkpoint: string, end: (entry: any) => boolean) => {
      const post = (step: string) => fetch(`${service.url}/mgmt/v1/weights/${step}`, { method: 'POST', headers, body: JSON.stringify({ weights: { remote: checkpoint } }) });
      expect((await post('upload')).status).toBe(202);
      const staged = await until((entry) => entry.state === 'ready' && entry.staged?.checkpoint === checkpoint);
      expect((await post('reload')).status).toBe(202);
      return { path: staged.staged.path as string, end: await until(end) };
    };
    const ask = () => fetch(`${service.url}/compat/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ model: 'remote', messages: [{ role: 'user', content: 'hello' }] }) });

    beforeAll(async () => {
      engine = new FakeEngine();
      await engine.start();
      const fleetFile = join(tempDir('fleet'), 'fleet.json');
      writeFileSync(fleetFile, JSON.stringify({ models: { remote: { replicas: [{ kind: 'vllm', base_url: engine.url }] } } }));
      service = await startTestService({
        env: { FLEET_FILE: fleetFile, AWS_ENDPOINT_URL_S3: inject('s3Endpoint'), AWS_REGION: 'us-east-1', S3_FORCE_PATH_STYLE: 'true', WEIGHT_SYNC_RETRY_MS: '20', WEIGHT_SYNC_PROBE_TIMEOUT_SECONDS: '1' },
      });
    });
    afterAll(async () => {
      await service?.close();
      await engine?.stop();
    });

    for (const [fault, reason] of [
      ['paused', /remote\/0: the probe was answered 503/],
      ['garbled', /remote\/0: the probe was not answered with a chat completion/],
      ['hangs', /remote\/0: the probe had no answer within 1 s/],
    ] as const) {
      it(`catches an engine that ${fault === 'hangs' ? 'hangs' : `is left ${fault}`} after its reload, reloads the earlier weights, and no request meets it`, async () => {
        // A good sync first: its weights are what a failed one goes back to.
        const good = await sync(location, (entry) => entry.state === 'ready' && entry.staged === null && entry.serving.checkpoint === location);
        engine.reloadFault = { fault, goodWeights: good.path };
        let asking = true;
        const statuses: number[] = [];
        const users = Promise.all(
          Array.from({ length: 2 }, async () => {
            while (asking) statuses.push((await ask()).status);
          }),
        );
        const failed = await sync(location, (entry) => entry.state === 'failed');
        asking = false;
        await users;
        engine.reloadFault = undefined;
        expect(failed.end.sync.last_error).toMatch(reason);
        // vLLM was put back on the earlier weights after each failed probe.
        const reloads = engine.adminCalls.filter((call) => call.path === '/collective_rpc').map((call) => JSON.parse(call.body).kwargs.weights_path as string);
        expect(reloads.at(-1)).toBe(good.path);
        expect(reloads.filter((path) => path === failed.path).length).toBeGreaterThanOrEqual(1);
        // Users waited while it was out; none was answered by the broken engine.
        expect(statuses.length).toBeGreaterThan(0);
        expect(new Set(statuses)).toEqual(new Set([200]));
        expect((await ask()).status).toBe(200);
      });
    }
  });
});
