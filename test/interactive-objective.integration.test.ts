import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../src/platform/package-root.js';
import { createBatch, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { startNode, stop } from './support/processes.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir } from './support/service.js';

// The interactive objective and the engine's gauges, wired: a FLEET_FILE `vllm` replica whose
// engine is the benchmark upstream in its continuous-batching mode (bench/upstream.ts --engine
// continuous: a stand-in for a vLLM server, which cannot run here, following its HTTP contract and
// /metrics gauges), made so that every running sequence slows every step by 2 ms. What is asserted
// is what /metrics says the scheduler chose, not how fast anything was.
const MODEL = 'objective-model';
const OBJECTIVE_MS = 250;
const CEILING = 64;

let simulator: ChildProcess;
let service: WholeService;
let client: OpenAI;

const scrape = async (): Promise<string> => (await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).text();
const sample = (text: string, name: string): number | undefined => {
  const line = text.split('\n').find((row) => row.startsWith(`${name}{`) && row.includes(`model="${MODEL}"`));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
};

beforeAll(async () => {
  const { child, match } = await startNode(join(packageRoot, 'dist/bench/upstream.js'), ['--engine', 'continuous', '--max-num-seqs', '32', '--sequence-us', '2000', '--default-max-tokens', '8'], {}, /listening on (\d+)/);
  simulator = child;
  const engineUrl = `http://127.0.0.1:${match[1]}`;
  const fleetFile = join(tempDir(), 'fleet.json');
  // No metrics_url: a vllm replica's gauges are read at its base URL's origin by default.
  writeFileSync(fleetFile, JSON.stringify({ models: { [MODEL]: { interactive_p99_ms: OBJECTIVE_MS, replicas: [{ kind: 'vllm', base_url: `${engineUrl}/v1`, concurrency: CEILING }] } } }));
  service = await startTestService({ env: { FLEET_FILE: fleetFile, BATCH_CHUNK_LINES: '50', BATCH_PARALLEL_CHUNKS: '8' } });
  client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await service?.close();
  if (simulator) await stop(simulator);
});

describe('the interactive objective beside a batch, on a continuous-batching engine', () => {
  it('holds the batch concurrency below what the engine could take, and shows the objective, the measured p99 and the concurrency chosen', async () => {
    const reserved = await reserveJob(service.url, { job_id: 'objective-job', model: MODEL, use_case: 'objective test', sla: '24h', price_1m_tokens: 0.1 });
    expect(reserved.status, await reserved.text()).toBe(201);
    const lines = Array.from({ length: 3000 }, (_, index) => JSON.stringify({ custom_id: `line-${index}`, method: 'POST', url: '/v1/chat/completions', body: { model: MODEL, messages: [{ role: 'user', content: `line ${index}` }] } }));
    const file = await client.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'batch.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'objective-job' });
    await waitForStatus(client, batch.id, ['in_progress'], 60_000);

    // Interactive requests beside it, one after another with short gaps, until the objective has cut
    // the batch below the engine's 32 sequences (a first cut of a tenth, judged on ten answers, may
    // land above them while the engine is still being filled; later judgements go on cutting).
    let cappedAt: number | undefined;
    for (let sent = 0; sent < 400 && cappedAt === undefined; sent++) {
      const response = await fetch(`${service.url}/compat/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `interactive ${sent}` }], max_tokens: 8 }),
      });
      expect(response.status, await response.text()).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 20));
      if (sent % 20 === 19) {
        const scraped = await scrape();
        const cap = sample(scraped, 'spool_interactive_objective_batch_cap');
        const limit = sample(scraped, 'spool_engine_concurrency_limit');
        // The objective cut the batch: its cap holds batch work below what the learned limit allows, and below the engine's sequences.
        if (cap !== undefined && limit !== undefined && cap < limit && cap < 32) cappedAt = cap;
      }
    }
    const text = await scrape();
    await client.batches.cancel(batch.id);
    await waitForStatus(client, batch.id, ['cancelled', 'completed'], 60_000);

    expect(sample(text, 'spool_interactive_p99_objective_seconds')).toBe(OBJECTIVE_MS / 1000);
    expect(sample(text, 'spool_interactive_p99_seconds')).toBeGreaterThan(0);
    // The engine holds 32 sequences and Spool may send 64: the objective cut the batch below what
    // the learned limit allowed, and the concurrency chosen follows the cap.
    expect(cappedAt, 'the batch concurrency the objective allowed, below the learned limit and the engine\'s 32 sequences, within 400 interactive requests').toBeDefined();
    expect(sample(text, 'spool_batch_concurrency')).toBeLessThanOrEqual(sample(text, 'spool_interactive_objective_batch_cap') ?? Number.POSITIVE_INFINITY);
    expect(sample(text, 'spool_batch_concurrency')).toBeLessThan(32);
    // The replica's limit is guarded by the gauges read at the default address.
    expect(sample(text, 'spool_engine_capacity_from_gauges')).toBe(1);
  }, 240_000);
});
