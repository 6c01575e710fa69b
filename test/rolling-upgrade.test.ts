import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, mkdirSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { batchProgress, chatLine, createBatch, fileLines, reserveJob, waitFor, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { type KafkaBroker, startKafkaBroker } from './support/kafka-broker.js';
import { type PostgresServer, startPostgres } from './support/postgres-server.js';
import { PREVIOUS_RELEASE, previousReleaseCli, previousReleaseUnavailable } from './support/previous-release.js';
import { startNode } from './support/processes.js';
import { SCALE_OUT_ROLES, type ScaleOutEnv, scaleOutEnv } from './support/scale-out-processes.js';
import { tempDir, waitUntilReady } from './support/service.js';
import { runSpool } from './support/spool-cli.js';
import { packageRoot } from '../src/platform/package-root.js';
import { POSTGRES_MIGRATIONS } from '../src/event-store/postgres-schema.js';

/**
 * A rolling upgrade of the scaled-out shape on PostgreSQL and Kafka, from the previous release to
 * this one, in the order docs/OPERATIONS.md (Upgrades) gives, while one batch runs: the inference
 * processors first (the first new process migrates the log's schema; the old processes go on
 * appending beside it), then the validator, the finalizer and the relay, then the API processes
 * one at a time while clients use the other. The batch ends with every line exactly once, both
 * API processes answer it alike, `spool replay` rebuilds identical read models, and a process of
 * the previous release refuses to start on the migrated log (roll forward, not back). The engine
 * is a stand-in: vLLM needs a GPU.
 */
const unavailable = previousReleaseUnavailable();

describe.skipIf(unavailable !== undefined)(`a rolling upgrade from the previous release (${PREVIOUS_RELEASE.slice(0, 7)})${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  const engine = new FakeEngine();
  const root = tempDir('rolling-upgrade');
  const logs = join(root, 'logs');
  mkdirSync(logs, { recursive: true });
  let broker: KafkaBroker;
  let postgres: PostgresServer;
  let previousCli: string;
  const processes = new Map<string, ChildProcess>();
  const urls = new Map<string, string>();
  let env: ScaleOutEnv;
  const thisCli = join(packageRoot, 'dist/src/process/cli.js');

  /** Starts (or starts again) a role from a build's CLI, its data under root/name (new each time: read models are rebuilt). */
  async function start(name: string, cli: string): Promise<void> {
    const version = cli === thisCli ? 'new' : 'old';
    const { child, match } = await startNode(cli, SCALE_OUT_ROLES[name]!, { ...env, DATA_DIR: join(root, `${name}-${version}`) }, /"url":"(http:\/\/[^"]+)"/);
    const logFile = join(logs, `${name}-${version}.log`);
    child.stdout?.on('data', (chunk: Buffer) => appendFileSync(logFile, chunk));
    child.stderr?.on('data', (chunk: Buffer) => appendFileSync(logFile, chunk));
    processes.set(name, child);
    urls.set(name, match[1]!);
    await waitUntilReady(match[1]!, 60_000);
  }
  /** Stops a role as Kubernetes does in a rollout: SIGTERM, then waits for its bounded shutdown. */
  async function stopRole(name: string): Promise<void> {
    const child = processes.get(name)!;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  }
  const upgrade = async (name: string) => {
    await stopRole(name);
    await start(name, thisCli);
  };
  const clientOf = (name: string) => new OpenAI({ baseURL: `${urls.get(name)}/v1`, apiKey: 'placeholder', maxRetries: 5 });
  const schemaVersion = async () => {
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      return Number((await client.query<{ version: number }>('SELECT max(version) AS version FROM spool_schema')).rows[0]!.version);
    } finally {
      await client.end();
    }
  };

  // Built on first use (its own npm ci where its dependencies differ from this checkout's): minutes
  // on a busy machine, given their own time apart from starting the deployment.
  beforeAll(() => {
    previousCli = previousReleaseCli();
  }, 600_000);

  beforeAll(async () => {
    await engine.start();
    [broker, postgres] = await Promise.all([startKafkaBroker({ dir: join(root, 'kafka') }), startPostgres()]);
    env = scaleOutEnv({ eventStoreUrl: postgres.url, s3Prefix: `rolling-upgrade-${randomUUID()}`, brokers: broker.brokers, engineUrl: engine.url });
    // The previous release everywhere, as the deployment runs before the upgrade.
    await start('api-1', previousCli);
    await Promise.all(Object.keys(SCALE_OUT_ROLES).filter((name) => name !== 'api-1').map((name) => start(name, previousCli)));
    expect((await reserveJob(urls.get('api-1')!, { job_id: 'upgrade-job', model: 'tiny-chat', use_case: 'upgrade', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
  }, 300_000);

  afterAll(async () => {
    for (const child of processes.values()) if (child.exitCode === null) child.kill('SIGKILL');
    await broker?.kill();
    await postgres?.stop();
    await engine.stop();
  });

  it('keeps a running batch to every line exactly once while each process is replaced in order, and refuses a step back', async () => {
    const schemaBefore = await schemaVersion();
    // Slow answers while the processes are replaced, so that the batch runs through every step.
    engine.latencyMs = 500;
    const total = 1600;
    const client = clientOf('api-2');
    const input = await client.files.create({ file: await toFile(Buffer.from(`${Array.from({ length: total }, (_, index) => chatLine(`u${index}`, `line ${index}`)).join('\n')}\n`), 'upgrade.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'upgrade-job' });
    const progress = () => batchProgress(clientOf('api-2'), batch.id);
    await waitFor(async () => (await progress()) >= 0.05, 'a twentieth of the batch done on the previous release');

    // 1. The inference processors, one after the other: the first new process migrates the schema.
    await upgrade('inference-1');
    expect(await schemaVersion()).toBe(POSTGRES_MIGRATIONS.length);
    await upgrade('inference-2');
    // 2. The other processors, then the relay (one pod, Recreate).
    await upgrade('validator');
    await upgrade('finalizer');
    await upgrade('relay');
    // 3. The API processes one at a time; the client uses the one not being replaced.
    await upgrade('api-1');
    expect(await progress()).toBeLessThan(1);
    await upgrade('api-2');
    const stillRunning = await clientOf('api-1').batches.retrieve(batch.id);
    expect(stillRunning.status, 'the batch ran through the whole upgrade').toBe('in_progress');
    engine.latencyMs = 10;
    const done = await waitForStatus(clientOf('api-1'), batch.id, ['completed', 'failed', 'expired', 'cancelled'], 180_000);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total, completed: total, failed: 0 });
    const seen = [...(await fileLines(clientOf('api-1'), done.output_file_id)), ...(await fileLines(clientOf('api-1'), done.error_file_id))].map((line) => line.custom_id as string);
    expect(seen).toHaveLength(total);
    expect(new Set(seen).size).toBe(total);
    const other = clientOf('api-2');
    await waitFor(async () => (await other.batches.retrieve(batch.id)).status === 'completed', 'api-2 shows the batch completed');
    expect({ ...(await other.batches.retrieve(batch.id)) }).toEqual({ ...done });

    // Roll forward, not back: a process of the previous release now refuses the migrated log (when
    // this release migrated it), saying why.
    if (schemaBefore < POSTGRES_MIGRATIONS.length) {
      const refused = await new Promise<{ code: number | null; output: string }>((resolve) => {
        const child = spawn(process.execPath, [previousCli, 'processor', 'inference'], { env: { PATH: process.env.PATH ?? '', ...env, DATA_DIR: join(root, 'step-back'), STARTUP_TIMEOUT_SECONDS: '5' }, stdio: ['ignore', 'pipe', 'pipe'] });
        let output = '';
        child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.once('exit', (code) => resolve({ code, output }));
      });
      expect(refused.code).not.toBe(0);
      expect(refused.output).toMatch(/newer than this Spool knows/);
    }

    await stopRole('api-1');
    const replayed = await runSpool(['replay'], { DATA_DIR: join(root, 'api-1-new'), EVENTSTORE_URL: postgres.url, LOG_LEVEL: 'silent' });
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(JSON.parse(replayed.stdout)).toMatchObject({ identical: true });
  }, 420_000);
});
