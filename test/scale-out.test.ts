import Database from 'better-sqlite3';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { AssignerProtocol, logLevel } from 'kafkajs';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScaleOutEnv, scaleOutEnv, startLoggedRole } from './support/scale-out-processes.js';
import { packageRoot } from '../src/platform/package-root.js';
import { batchProgress, chatLine, createBatch, fileLines, reserveJob, waitForStatus, waitUntil } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { type KafkaBroker, kafkaClient, startKafkaBroker } from './support/kafka-broker.js';
import { tempDir, waitUntilReady } from './support/service.js';
import { runSpool } from './support/spool-cli.js';

/**
 * The scaled-out shape on real parts: a real Apache Kafka broker of this suite's own (so it can be
 * stopped), the S3-compatible server of the test run, one embedded event log file shared by the
 * processes (EventStoreDB cannot run here), and every Spool role as its own OS process. The
 * inference engine is a stand-in: vLLM and SGLang need GPUs.
 */
describe('scaled out over Kafka: API, relay and processors as separate processes', () => {
  const engine = new FakeEngine();
  const root = tempDir('scale-out');
  const logs = join(root, 'logs');
  mkdirSync(logs, { recursive: true });
  let broker: KafkaBroker;
  let client: OpenAI;
  let apiUrl: string;
  let apiDataDir: string;
  const processes = new Map<string, { child: ChildProcess; url: string }>();
  const batches: Array<{ id: string; expect: string[] }> = [];

  let env: ScaleOutEnv;

  async function start(name: string, args: string[]): Promise<void> {
    processes.set(name, await startLoggedRole(name, args, env, { root, logs }));
  }
  const ready = async (name: string) => (await (await fetch(`${processes.get(name)!.url}/ready`)).json()) as { status: string; roles: string[]; processors?: Record<string, { handled: number; partitions?: number[] }> };
  const handled = async (name: string) => (await ready(name)).processors?.inference?.handled ?? 0;
  /** Until the two inference processors hold every inference partition between them, each its half: a group still settling redelivers what it moves. */
  const settledInferenceGroup = async (partitions: number) => {
    const held = () => Promise.all(['inference-1', 'inference-2'].map(async (name) => (await ready(name)).processors?.inference?.partitions ?? []));
    const settled = (each: number[][]) => each.every((one) => one.length === partitions / 2) && new Set(each.flat()).size === partitions;
    await waitUntil(async () => settled(await held()), 60_000);
    const now = await held();
    expect(settled(now), `the inference group did not settle: ${JSON.stringify(now)}`).toBe(true);
  };

  const submit = async (lines: string[], label: string) => {
    const input = await client.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), `${label}.jsonl`), purpose: 'batch' });
    return createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'scale-job' });
  };

  const progress = (id: string) => batchProgress(client, id);

  const expectEveryLineOnce = async (id: string, total: number) => {
    const done = await client.batches.retrieve(id);
    const seen = [...(await fileLines(client, done.output_file_id)), ...(await fileLines(client, done.error_file_id))].map((line) => line.custom_id as string);
    expect(seen).toHaveLength(total);
    expect(new Set(seen).size).toBe(total);
  };

  beforeAll(async () => {
    await engine.start();
    broker = await startKafkaBroker({ dir: join(root, 'kafka') });
    env = scaleOutEnv({ eventStoreUrl: `file:${join(root, 'shared', 'events.sqlite')}`, s3Prefix: `scale-out-${randomUUID()}`, brokers: broker.brokers, engineUrl: engine.url });
    // The API first: it owns the demo data; then the relay and every processor kind.
    await start('api', ['serve']);
    apiUrl = processes.get('api')!.url;
    apiDataDir = join(root, 'api');
    await Promise.all([
      start('relay', ['relay']),
      start('validator', ['processor', 'validator']),
      start('inference-1', ['processor', 'inference']),
      start('inference-2', ['processor', 'inference']),
      start('finalizer', ['processor', 'finalizer']),
      start('checkpoint', ['processor', 'checkpoint']),
    ]);
    for (const { url } of processes.values()) {
      await waitUntilReady(url, 60_000);
      expect((await fetch(`${url}/live`)).status).toBe(200);
    }
    client = new OpenAI({ baseURL: `${apiUrl}/v1`, apiKey: 'placeholder', maxRetries: 2 });
    expect((await reserveJob(apiUrl, { job_id: 'scale-job', model: 'tiny-chat', use_case: 'scale', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
  }, 240_000);

  afterAll(async () => {
    for (const { child } of processes.values()) if (child.exitCode === null) child.kill('SIGKILL');
    await broker?.kill();
    await engine.stop();
  });

  it('every process answers its health probes and says what it runs', async () => {
    expect((await ready('api')).roles).toEqual(['api']);
    expect((await ready('relay')).roles).toEqual(['relay']);
    expect((await ready('inference-1')).roles).toEqual(['inference']);
    expect((await ready('checkpoint')).roles).toEqual(['checkpoint']);
  });

  it('cuts a batch into a multiple of the inference partitions’ count of chunks, so both processors run the same share of it', async () => {
    engine.latencyMs = 0;
    // 8 inference partitions (twice KAFKA_PARTITIONS); 12 lines would be 2 chunks of BATCH_CHUNK_LINES 10.
    await settledInferenceGroup(8);
    const before = await Promise.all([handled('inference-1'), handled('inference-2')]);
    const batch = await submit(Array.from({ length: 12 }, (_, index) => chatLine(`s${index}`, `line ${index}`)), 'spread');
    batches.push({ id: batch.id, expect: ['BatchCreated', 'BatchValidated', 'BatchFinalizing', 'BatchCompleted'] });
    expect((await waitForStatus(client, batch.id, ['completed', 'failed'], 60_000)).status).toBe('completed');
    await expectEveryLineOnce(batch.id, 12);
    const after = await Promise.all([handled('inference-1'), handled('inference-2')]);
    const ran = after.map((count, index) => count - before[index]!);
    expect(ran[0]! + ran[1]!).toBe(8);
    // Each processor holds half of the partitions: four chunks each.
    expect(ran).toEqual([4, 4]);
    // 90 lines would be 9 chunks of 10, one processor running a chunk more than the other (alone,
    // at the end): 16 chunks of 5 or 6 lines instead, two per partition, eight each.
    const larger = await submit(Array.from({ length: 90 }, (_, index) => chatLine(`e${index}`, `line ${index}`)), 'even');
    batches.push({ id: larger.id, expect: ['BatchCreated', 'BatchValidated', 'BatchFinalizing', 'BatchCompleted'] });
    expect((await waitForStatus(client, larger.id, ['completed', 'failed'], 60_000)).status).toBe('completed');
    await expectEveryLineOnce(larger.id, 90);
    const last = await Promise.all([handled('inference-1'), handled('inference-2')]);
    expect(last.map((count, index) => count - after[index]!)).toEqual([8, 8]);
  }, 120_000);

  it('spreads a batch over both inference processors; one is killed -9 mid-batch and every line still ends up exactly once', async () => {
    engine.latencyMs = 60;
    const total = 600;
    const lines = Array.from({ length: total }, (_, index) => chatLine(`k${index}`, index % 97 === 5 ? `no [fail:400] ${index}` : `line ${index}`));
    const batch = await submit(lines, 'kill');
    batches.push({ id: batch.id, expect: ['BatchCreated', 'BatchValidated', 'BatchFinalizing', 'BatchCompleted'] });

    // Both processors take chunks before one of them dies.
    const deadline = Date.now() + 60_000;
    while ((await handled('inference-1')) < 2 || (await handled('inference-2')) < 2 || (await progress(batch.id)) < 0.2) {
      if (Date.now() > deadline) throw new Error(`no spread: inference-1 ${await handled('inference-1')}, inference-2 ${await handled('inference-2')}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await progress(batch.id)).toBeLessThan(0.9);
    const survivorBefore = await handled('inference-2');
    const victim = processes.get('inference-1')!.child;
    victim.kill('SIGKILL');
    await new Promise((resolve) => victim.once('exit', resolve));

    const done = await waitForStatus(client, batch.id, ['completed', 'failed'], 120_000);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total, completed: total - 7, failed: 7 });
    await expectEveryLineOnce(batch.id, total);
    expect(await handled('inference-2')).toBeGreaterThan(survivorBefore);
    // The group handed the dead processor's partitions to the survivor: it alone holds them all.
    const admin = kafkaClient({ brokers: [broker.brokers], logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      const partitions = (await admin.fetchTopicMetadata({ topics: ['spool.batch.inference'] })).topics[0]!.partitions;
      // Read once the group is stable: during a rebalance (a member rejoining) assignments are empty.
      const settledBy = Date.now() + 30_000;
      let group = (await admin.describeGroups(['spool-inference'])).groups[0]!;
      while (group.state !== 'Stable' && Date.now() < settledBy) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        group = (await admin.describeGroups(['spool-inference'])).groups[0]!;
      }
      expect(group.state).toBe('Stable');
      expect(group.members).toHaveLength(1);
      const assignment = AssignerProtocol.MemberAssignment.decode(group.members[0]!.memberAssignment);
      expect(assignment?.assignment['spool.batch.inference']?.sort((a, b) => a - b)).toEqual(partitions.map((partition) => partition.partitionId).sort((a: number, b: number) => a - b));
    } finally {
      await admin.disconnect();
    }
  }, 180_000);

  it('completes a batch while the Kafka broker is stopped and started again', async () => {
    engine.latencyMs = 40;
    const total = 300;
    const batch = await submit(Array.from({ length: total }, (_, index) => chatLine(`b${index}`, `line ${index}`)), 'broker');
    batches.push({ id: batch.id, expect: ['BatchCreated', 'BatchValidated', 'BatchFinalizing', 'BatchCompleted'] });
    while ((await progress(batch.id)) < 0.1) await new Promise((resolve) => setTimeout(resolve, 50));
    await broker.stop();
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect((await client.batches.retrieve(batch.id)).status).not.toBe('completed');
    await broker.start();
    const done = await waitForStatus(client, batch.id, ['completed', 'failed'], 150_000);
    expect(done.status).toBe('completed');
    await expectEveryLineOnce(batch.id, total);
  }, 240_000);

  it('fails and cancels batches too; a downstream consumer of batch-events sees each change once, in order', async () => {
    engine.latencyMs = 0;
    const failed = await submit([chatLine('a', 'one'), '{"custom_id": broken'], 'failed');
    batches.push({ id: failed.id, expect: ['BatchCreated', 'BatchFailed'] });
    const cancelled = await submit(Array.from({ length: 40 }, (_, index) => chatLine(`c${index}`, `slow ${index} [slow:300]`)), 'cancelled');
    batches.push({ id: cancelled.id, expect: ['BatchCreated', 'BatchValidated', 'BatchCancelRequested', 'BatchCancelled'] });
    await waitForStatus(client, cancelled.id, ['in_progress'], 60_000);
    await client.batches.cancel(cancelled.id);
    expect((await waitForStatus(client, failed.id, ['failed'], 60_000)).status).toBe('failed');
    expect((await waitForStatus(client, cancelled.id, ['cancelled'], 60_000)).status).toBe('cancelled');

    const consumer = spawn(process.execPath, [join(packageRoot, 'deploy/examples/batch-events-consumer.mjs'), '--exit-when-idle', '6'], {
      env: { PATH: process.env.PATH ?? '', KAFKA_BROKERS: broker.brokers },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let errors = '';
    consumer.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    consumer.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
    const code = await new Promise((resolve) => consumer.once('exit', resolve));
    expect(code, errors).toBe(0);
    const seen = output.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { batch_id: string; revision: number; event_type: string; status: string | null; event_id: string });
    expect(new Set(seen.map((event) => event.event_id)).size).toBe(seen.length);
    for (const batch of batches) {
      const changes = seen.filter((event) => event.batch_id === batch.id);
      expect(changes.map((event) => event.event_type), batch.id).toEqual(batch.expect);
      expect(changes.map((event) => event.revision)).toEqual(batch.expect.map((_, index) => index));
    }
    expect(seen.find((event) => event.batch_id === cancelled.id && event.event_type === 'BatchCancelRequested')?.status).toBe('cancelling');
  }, 180_000);

  it("only the API process keeps the history index: a processor's read models hold the rest, and replay finds them identical", async () => {
    const readModels = (name: string) => new Database(join(root, name, 'read-models.sqlite'), { readonly: true, fileMustExist: true });
    const kept = (name: string) => {
      const db = readModels(name);
      try {
        const checkpoints = db.prepare<[], { name: string }>('SELECT name FROM projection_checkpoints ORDER BY name').all().map((row) => row.name);
        const history = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'history'").get() ? (db.prepare('SELECT count(*) AS n FROM history').get() as { n: number }).n : undefined;
        const batches = (db.prepare('SELECT count(*) AS n FROM batches').get() as { n: number }).n;
        return { checkpoints, history, batches };
      } finally {
        db.close();
      }
    };
    const api = kept('api');
    expect(api.checkpoints).toContain('history');
    expect(api.history).toBeGreaterThan(900);
    for (const name of ['validator', 'inference-2', 'finalizer']) {
      const processor = kept(name);
      expect(processor.checkpoints, name).toEqual(api.checkpoints.filter((projection) => projection !== 'history'));
      expect(processor.history, name).toBeUndefined();
      expect(processor.batches, name).toBe(batches.length);
    }
    const replayed = await runSpool(['replay'], { DATA_DIR: join(root, 'inference-2'), EVENTSTORE_URL: env.EVENTSTORE_URL, LOG_LEVEL: 'silent' });
    expect(replayed.code, replayed.stderr).toBe(0);
    const report = JSON.parse(replayed.stdout) as { identical: boolean; tables: Record<string, number> };
    expect(report.identical).toBe(true);
    expect(report.tables.history ?? 0).toBe(0);
  }, 120_000);

  it('spool replay rebuilds the API process read models identically from the shared log', async () => {
    const replayed = await runSpool(['replay'], { DATA_DIR: apiDataDir, EVENTSTORE_URL: env.EVENTSTORE_URL, LOG_LEVEL: 'silent' });
    expect(replayed.code, replayed.stderr).toBe(0);
    const report = JSON.parse(replayed.stdout) as { identical: boolean; events: number; tables: Record<string, number> };
    expect(report.identical).toBe(true);
    expect(report.events).toBeGreaterThan(900);
    expect(report.tables.batches).toBe(batches.length);
  }, 120_000);
});
