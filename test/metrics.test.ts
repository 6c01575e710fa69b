import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createReadStream, readdirSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { S3BlobStore } from '../src/blob-store/s3-blob-store.js';
import { createS3Client } from '../src/platform/s3-client.js';
import { loadConfig } from '../src/config.js';
import { packageRoot } from '../src/platform/package-root.js';
import { type RunningService, startService } from '../src/service.js';
import { chatLine, createBatch, reserveJob, waitForStatus, waitUntil } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { type KafkaBroker, startKafkaBroker } from './support/kafka-broker.js';
import { startSpoolCli, stop, unusedPort, waitForReady } from './support/processes.js';
import { TEST_API_KEY, s3Env, tempDir } from './support/service.js';

const SERIES = [
  'spool_http_request_duration_seconds',
  'spool_batches',
  'spool_batch_lines_total',
  'spool_tokens_total',
  'spool_engine_requests_in_flight',
  'spool_engine_request_duration_seconds',
  'spool_scheduler_queue_depth',
  'spool_engine_concurrency_limit',
  'spool_batch_deadline_margin_seconds',
  'spool_batch_lines_after_deadline_total',
  'spool_weight_sync_step_duration_seconds',
  'spool_weight_sync_failures_total',
  'spool_event_store_append_duration_seconds',
  'spool_projection_lag_events',
  'spool_relay_lag_events',
  'spool_storage_full',
  'process_cpu_user_seconds_total',
  'nodejs_eventloop_lag_seconds',
];

/** Series name → its samples' label sets, from Prometheus text. */
function parseExposition(text: string): Map<string, Array<{ name: string; labels: Record<string, string>; value: number }>> {
  const series = new Map<string, Array<{ name: string; labels: Record<string, string>; value: number }>>();
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) series.set(line.split(' ')[2]!, series.get(line.split(' ')[2]!) ?? []);
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!sample) continue;
    const labels: Record<string, string> = {};
    for (const [, name, value] of (sample[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[name!] = value!;
    const family = [...series.keys()].filter((name) => sample[1]!.startsWith(name)).sort((a, b) => b.length - a.length)[0] ?? sample[1]!;
    series.get(family)?.push({ name: sample[1]!, labels, value: Number(sample[3]) });
  }
  return series;
}

async function scrape(url: string) {
  const response = await fetch(url);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/plain');
  return parseExposition(await response.text());
}

/** No label value may name one batch, line, file or job: series would grow with the work. */
function expectBoundedLabels(series: ReturnType<typeof parseExposition>): void {
  for (const [name, samples] of series) {
    for (const { labels } of samples) {
      for (const value of Object.values(labels)) {
        expect(value, `${name} ${JSON.stringify(labels)}`).not.toMatch(/(batch_|file-|sync_)[0-9A-Za-z]{8,}|metrics-job|line-[0-9]|http:\/\/|^[0-9a-f]{8}-[0-9a-f]{4}-/);
      }
    }
  }
}

const sum = (series: ReturnType<typeof parseExposition>, name: string, where: Record<string, string> = {}) =>
  [...series.values()].flat().filter((sample) => sample.name === name).filter((sample) => Object.entries(where).every(([key, value]) => sample.labels[key] === value)).reduce((total, sample) => total + sample.value, 0);


/**
 * The Kafka shape: this process runs the API, the relay, the validator, the finalizer and the
 * checkpoint processor; the inference processor is an OS process of its own, with /metrics on
 * METRICS_PORT. A batch and a weight sync run; every process's /metrics is scraped.
 */
describe('GET /metrics on every process', () => {
  const engine = new FakeEngine();
  const root = tempDir('metrics');
  let service: RunningService;
  let inference: { child: ChildProcess; url: string };
  let inferenceMetrics: string;
  let client: OpenAI;
  let broker: KafkaBroker;
  const headers = { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' };

  beforeAll(async () => {
    // A broker of its own: consumer groups and topics are named by Spool, not by the test.
    [broker] = await Promise.all([startKafkaBroker({ dir: join(root, 'kafka') }), engine.start()]);
    const checkpointPrefix = `metrics-ckpt-${randomUUID()}`;
    const s3 = s3Env(`metrics-${randomUUID()}`);
    for (const [name, value] of Object.entries(s3)) if (name.startsWith('AWS_')) process.env[name] = value;
    const store = new S3BlobStore(createS3Client({ endpoint: inject('s3Endpoint'), forcePathStyle: true }), { bucket: inject('s3Bucket'), prefix: checkpointPrefix });
    const folder = join(tempDir('ckpt'), 'out');
    execFileSync(process.execPath, [join(packageRoot, 'dist/src/process/cli.js'), 'checkpoint', 'create', '--out', folder, '--seed', '2']);
    for (const name of readdirSync(folder)) await store.put(`seed2/${name}`, createReadStream(join(folder, name)));
    process.env.METRICS_TEST_CHECKPOINT = `s3://${inject('s3Bucket')}/${checkpointPrefix}/seed2/`;

    const env = {
      HOST: '127.0.0.1',
      PORT: '0',
      API_KEY: TEST_API_KEY,
      EVENTSTORE_URL: `file:${join(root, 'shared', 'events.sqlite')}`,
      ...s3,
      KAFKA_BROKERS: broker.brokers,
      KAFKA_SESSION_TIMEOUT_MS: '6000',
      ENGINE_BASE_URL: engine.url,
      ENGINE_BACKOFF_MS: '20',
      BATCH_CHUNK_LINES: '5',
      WEIGHT_SYNC_RETRY_MS: '20',
    };
    service = await startService({
      config: loadConfig({ ...env, DATA_DIR: join(root, 'api') }),
      roles: ['api', 'relay', 'validator', 'finalizer', 'checkpoint'],
      logger: pino({ level: 'silent' }),
    });
    await waitForReady(service.url, 60_000);
    inferenceMetrics = `http://127.0.0.1:${await unusedPort()}`;
    inference = await startSpoolCli(['processor', 'inference'], { ...env, DATA_DIR: join(root, 'inference'), METRICS_PORT: inferenceMetrics.split(':').pop()! });
    await waitForReady(inference.url, 60_000);
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
    expect((await reserveJob(service.url, { job_id: 'metrics-job', model: 'tiny-chat', use_case: 'metrics', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    if (inference) await stop(inference.child);
    await service?.close();
    await broker?.kill();
    await engine.stop();
  });

  it('counts a batch and a weight sync, on bounded labels, in the process that did the work', async () => {
    const lines = Array.from({ length: 12 }, (_, index) => chatLine(`line-${index}`, `hello ${index}`));
    const input = await client.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'metrics.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'metrics-job' });
    expect((await waitForStatus(client, batch.id, ['completed', 'failed'], 60_000)).status).toBe('completed');
    await client.batches.retrieve(batch.id);

    const location = process.env.METRICS_TEST_CHECKPOINT!;
    expect((await fetch(`${service.url}/mgmt/v1/weights/upload`, { method: 'POST', headers, body: JSON.stringify({ weights: { 'spool-tiny': location } }) })).status).toBe(202);
    const weightState = async () => (((await (await fetch(`${service.url}/mgmt/v1/weights/status`, { headers })).json()) as any).models['spool-tiny'] as { state: string; staged: unknown; serving: { checkpoint: string } });
    for (let deadline = Date.now() + 30_000; !(await weightState()).staged; ) {
      if (Date.now() > deadline) throw new Error(`never staged: ${JSON.stringify(await weightState())}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect((await fetch(`${service.url}/mgmt/v1/weights/reload`, { method: 'POST', headers, body: JSON.stringify({ weights: { 'spool-tiny': location } }) })).status).toBe(202);
    for (let deadline = Date.now() + 30_000; (await weightState()).serving.checkpoint !== location; ) {
      if (Date.now() > deadline) throw new Error(`never reloaded: ${JSON.stringify(await weightState())}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }

    // The finalizer records a batch's deadline margin once it has also removed the batch's work
    // files, a moment after the batch shows completed (on a loaded machine, after the weight sync
    // above): that moment is waited for, and the count asserted below.
    await waitUntil(async () => sum(await scrape(`${service.url}/metrics`), 'spool_batch_deadline_margin_seconds_count') > 0, 10_000);
    const api = await scrape(`${service.url}/metrics`);
    const worker = await scrape(`${inferenceMetrics}/metrics`);
    // /metrics moved to METRICS_PORT: the processor's health port no longer serves it.
    expect((await fetch(`${inference.url}/metrics`)).status).toBe(404);
    for (const name of SERIES) expect(api.has(name) || worker.has(name), name).toBe(true);
    for (const name of ['spool_batch_lines_total', 'spool_tokens_total', 'spool_engine_request_duration_seconds', 'spool_http_request_duration_seconds', 'process_cpu_user_seconds_total']) expect(worker.has(name), name).toBe(true);
    expectBoundedLabels(api);
    expectBoundedLabels(worker);

    // The lines and tokens are counted where they were recorded: the inference process.
    expect(sum(worker, 'spool_batch_lines_total', { outcome: 'completed', endpoint: '/v1/chat/completions' })).toBe(12);
    expect(sum(worker, 'spool_tokens_total', { kind: 'prompt', model: 'tiny-chat' })).toBeGreaterThan(0);
    expect(sum(worker, 'spool_engine_request_duration_seconds_count', { model: '*', class: 'batch' })).toBeGreaterThanOrEqual(12);
    expect(worker.get('spool_engine_concurrency_limit')?.some((sample) => sample.labels.replica === 'engine-base-url-0' && sample.value > 0)).toBe(true);
    // The API process: batches by status, route patterns (not URLs), the finished batch's margin, the weight sync's steps.
    expect(sum(api, 'spool_batches', { status: 'completed' })).toBe(1);
    expect(api.get('spool_http_request_duration_seconds')?.some((sample) => sample.name === 'spool_http_request_duration_seconds_count' && sample.labels.route === '/v1/batches/:batch_id' && sample.labels.status === '2xx' && sample.labels.method === 'GET')).toBe(true);
    expect(sum(api, 'spool_batch_deadline_margin_seconds_count')).toBe(1);
    expect(sum(api, 'spool_batch_deadline_margin_seconds_sum')).toBeGreaterThan(23 * 3600);
    for (const step of ['validate', 'transfer', 'reload']) expect(sum(api, 'spool_weight_sync_step_duration_seconds_count', { step }), step).toBeGreaterThanOrEqual(1);
    expect(sum(api, 'spool_event_store_append_duration_seconds_count')).toBeGreaterThan(0);
    expect(api.get('spool_projection_lag_events')?.length).toBeGreaterThan(0);
    expect(sum(api, 'spool_engine_requests_in_flight')).toBe(0);
  }, 120_000);
});
