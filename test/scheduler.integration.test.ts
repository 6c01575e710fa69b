import type { ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KafkaBroker, startKafkaBroker } from './support/kafka-broker.js';
import { startNode, startSpoolCli, stop } from './support/processes.js';
import { packageRoot } from '../src/platform/package-root.js';
import { createBatch, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir, waitUntilReady } from './support/service.js';

// The fleet scheduler's promises, seen where they matter: in the order the engine (the upstream
// simulator, bench/upstream.ts, in its own process) starts requests. Order is asserted, never time.
const MODEL = 'sched-model';
const SLOTS = 2;

interface Simulator {
  url: string;
  child: ChildProcess;
}

async function startSimulator(latencyMs: number, policy: 'fcfs' | 'priority'): Promise<Simulator> {
  const { child, match } = await startNode(join(packageRoot, 'dist/bench/upstream.js'), [String(latencyMs), String(SLOTS), '--policy', policy], {}, /listening on (\d+)/);
  return { url: `http://127.0.0.1:${match[1]}`, child };
}

/** The markers (first message content) of the requests the engine started, in the order it started them. */
async function startedMarkers(simulator: Simulator): Promise<string[]> {
  return ((await (await fetch(`${simulator.url}/log`)).json()) as { started: Array<{ marker: string }> }).started.map((entry) => entry.marker);
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs / 1000} s for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const lines = (label: string, count: number) =>
  `${Array.from({ length: count }, (_, index) => JSON.stringify({ custom_id: `${label}-${index}`, method: 'POST', url: '/v1/chat/completions', body: { model: MODEL, messages: [{ role: 'user', content: `${label} ${index}` }] } })).join('\n')}\n`;

async function submit(client: OpenAI, label: string, count: number, jobId: string): Promise<string> {
  const file = await client.files.create({ file: await toFile(Buffer.from(lines(label, count)), `${label}.jsonl`), purpose: 'batch' });
  return (await createBatch(client, { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: jobId })).id;
}

/** Stops a batch the test no longer needs, unless it has already ended. */
async function cancelIfRunning(client: OpenAI, batchId: string): Promise<void> {
  const batch = await client.batches.retrieve(batchId);
  if (batch.status === 'validating' || batch.status === 'in_progress') await client.batches.cancel(batchId);
}

async function reserve(url: string, jobId: string, sla: string): Promise<void> {
  const response = await reserveJob(url, { job_id: jobId, model: MODEL, use_case: 'scheduler test', sla, price_1m_tokens: 0.1 });
  expect(response.status, await response.text()).toBe(201);
}

async function interactive(url: string, marker: string): Promise<void> {
  const response = await fetch(`${url}/compat/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: marker }] }),
  });
  expect(response.status, await response.text()).toBe(200);
}

/**
 * (i) With a batch filling the engine and Spool's queues, an interactive request takes one of the
 * next free slots: at most SLOTS batch lines (those whose slots freed as it arrived) start
 * between its arrival and its own start.
 */
async function interactiveOvertakesBatch(url: string, client: OpenAI, simulator: Simulator, label: string): Promise<void> {
  await reserve(url, `${label}-job`, '24h');
  const batchId = await submit(client, label, 60, `${label}-job`);
  await until('the batch to fill the engine', async () => (await startedMarkers(simulator)).filter((marker) => marker.startsWith(label)).length >= 2 * SLOTS);
  const arrivedAt = (await startedMarkers(simulator)).length;
  await interactive(url, `${label}-interactive`);
  const started = await startedMarkers(simulator);
  const position = started.indexOf(`${label}-interactive`);
  const overtaking = started.slice(arrivedAt, position).filter((marker) => marker.startsWith(`${label} `)).length;
  await cancelIfRunning(client, batchId);
  expect(overtaking, `batch lines that started after the interactive request arrived and before it (engine order: ${started.slice(arrivedAt, position + 1).join(', ')})`).toBeLessThanOrEqual(SLOTS);
}

/**
 * (ii) A batch on a 1-minute job created after a large one on a 24-hour job: once it is validated,
 * its lines start before the loose batch's remaining ones (a few slots' worth of slack for the
 * moment it takes to reach the engine). `hops`: lines the engine may start after BatchValidated
 * before the tight batch's chunks can reach it at all, beyond the 2 × SLOTS already sent; served
 * in arrival order, about 70 would.
 */
async function tightOvertakesLoose(url: string, client: OpenAI, simulator: Simulator, label: string, hops = 0): Promise<void> {
  await reserve(url, `${label}-loose`, '24h');
  await reserve(url, `${label}-tight`, '1m');
  const looseId = await submit(client, `${label}-loose`, 80, `${label}-loose`);
  await until('the loose batch to fill the engine', async () => (await startedMarkers(simulator)).filter((marker) => marker.startsWith(`${label}-loose `)).length >= 2 * SLOTS);
  const tightId = await submit(client, `${label}-tight`, 8, `${label}-tight`);
  await waitForStatus(client, tightId, ['in_progress', 'finalizing', 'completed'], 60_000);
  const validatedAt = (await startedMarkers(simulator)).length;
  await waitForStatus(client, tightId, ['completed', 'expired', 'failed'], 90_000);
  const started = await startedMarkers(simulator);
  const lastTight = started.findLastIndex((marker) => marker.startsWith(`${label}-tight `));
  const looseAhead = started.slice(validatedAt, lastTight).filter((marker) => marker.startsWith(`${label}-loose `)).length;
  await cancelIfRunning(client, looseId);
  expect(lastTight, 'every line of the tight batch started').toBeGreaterThanOrEqual(0);
  expect(looseAhead, `loose lines that started after the tight batch was validated and before its last line`).toBeLessThanOrEqual(2 * SLOTS + hops);
}

describe('the fleet scheduler on the embedded default, the upstream simulator as engine', () => {
  let simulator: Simulator;
  let service: WholeService;
  let client: OpenAI;

  beforeAll(async () => {
    simulator = await startSimulator(150, 'fcfs');
    // ENGINE_CONCURRENCY equal to the engine's slots: every queue is Spool's own.
    service = await startTestService({
      env: { ENGINE_BASE_URL: `${simulator.url}/v1`, ENGINE_MODELS: MODEL, ENGINE_CONCURRENCY: String(SLOTS), BATCH_CHUNK_LINES: '10', BATCH_PARALLEL_CHUNKS: '4' },
    });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  afterAll(async () => {
    await service?.close();
    if (simulator) await stop(simulator.child);
  });

  it('an interactive request overtakes the batch lines queued before it', async () => {
    await interactiveOvertakesBatch(service.url, client, simulator, 'embedded-i');
  }, 60_000);

  it("a tight batch's lines start before the remaining lines of a loose batch created earlier", async () => {
    await tightOvertakesLoose(service.url, client, simulator, 'embedded-ii');
  }, 120_000);
});

/**
 * The scaled-out shape: API, relay, validator, one inference processor and a finalizer as
 * processes on a Kafka broker of this suite's own. ENGINE_CONCURRENCY is four times the engine's
 * slots (Spool is not told them) and the simulator serves by the `priority` field as vLLM's
 * priority policy does, so the order at the engine is what Spool asks for.
 */
describe('the fleet scheduler on Kafka, processes, the priority-scheduling simulator as engine', () => {
  const root = tempDir('scheduler-kafka');
  let broker: KafkaBroker;
  let simulator: Simulator;
  let client: OpenAI;
  let apiUrl: string;
  let inferenceUrl: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    broker = await startKafkaBroker({ dir: join(root, 'kafka') });
    simulator = await startSimulator(150, 'priority');
    const env = {
      HOST: '127.0.0.1',
      PORT: '0',
      API_KEY: TEST_API_KEY,
      LOG_LEVEL: 'info',
      EVENTSTORE_URL: `file:${join(root, 'shared', 'events.sqlite')}`,
      BLOB_STORE: `file:${join(root, 'shared', 'blobs')}`,
      KAFKA_BROKERS: broker.brokers,
      KAFKA_SESSION_TIMEOUT_MS: '6000',
      KAFKA_PARTITIONS: '2',
      // A vLLM-style server that schedules by the priority field Spool sends it.
      FLEET_FILE: join(root, 'fleet.json'),
      ENGINE_CONCURRENCY: String(SLOTS * 4),
      BATCH_CHUNK_LINES: '10',
      BATCH_PARALLEL_CHUNKS: '4',
    };
    mkdirSync(join(root, 'shared'), { recursive: true });
    writeFileSync(join(root, 'fleet.json'), JSON.stringify({ models: { [MODEL]: { replicas: [{ kind: 'vllm', base_url: `${simulator.url}/v1`, priority_hints: true }] } } }));
    const urls: string[] = [];
    for (const [name, args] of [
      ['api', ['serve']],
      ['relay', ['relay']],
      ['validator', ['processor', 'validator']],
      ['inference', ['processor', 'inference']],
      ['finalizer', ['processor', 'finalizer']],
    ] as const) {
      const { child, url } = await startSpoolCli([...args], { ...env, DATA_DIR: join(root, name) });
      const logFile = join(root, `${name}.log`);
      child.stdout?.on('data', (chunk: Buffer) => appendFileSync(logFile, chunk));
      child.stderr?.on('data', (chunk: Buffer) => appendFileSync(logFile, chunk));
      children.push(child);
      urls.push(url);
    }
    for (const url of urls) await waitUntilReady(url, 60_000);
    apiUrl = urls[0]!;
    inferenceUrl = urls[3]!;
    client = new OpenAI({ baseURL: `${apiUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await Promise.all(children.map((child) => stop(child)));
    if (simulator) await stop(simulator.child);
    await broker?.kill();
  });

  it('an interactive request overtakes the batch lines queued before it', async () => {
    await interactiveOvertakesBatch(apiUrl, client, simulator, 'kafka-i');
  }, 60_000);

  it("a tight batch's lines start before the remaining lines of a loose batch created earlier", async () => {
    // The tight batch's chunks reach the inference processor through the relay, the broker and the
    // processor's read models, each process polling the shared log file every 50 ms: a few
    // hundred ms (more with the whole suite running beside it) in which the engine (SLOTS slots,
    // 150 ms a line, about 13 lines/s) starts lines of the loose batch. One run gave 5 against
    // the embedded bound of 4.
    await tightOvertakesLoose(apiUrl, client, simulator, 'kafka-ii', 2 * SLOTS);
  }, 120_000);

  it('the inference processor keeps slots free for the interactive load the API reports, though it never sees those requests', async () => {
    const reserveOn = async (url: string) => {
      const text = await (await fetch(`${url}/metrics`)).text();
      return Number(new RegExp(`^spool_scheduler_interactive_reserve\\{model="${MODEL}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    };
    const answered: Array<Promise<void>> = [];
    let sending = true;
    const traffic = (async () => {
      for (let index = 0; sending && index < 600; index++) {
        answered.push(interactive(apiUrl, `kafka-iii-${index}`));
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    try {
      await until('the inference processor to keep a slot free for the API’s interactive requests', async () => (await reserveOn(inferenceUrl)) >= 1, 30_000);
    } finally {
      sending = false;
      await traffic;
      await Promise.all(answered);
    }
  }, 60_000);
});
