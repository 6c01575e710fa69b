// A chunk's place among those an inference processor runs at once is given up once its lines are
// answered, not once its last outcomes are recorded: that append waits for the log's commit to
// reach the disk, and the next chunk's lines need not wait for it (many small batches at once
// spent much of each chunk's place so).
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import type { EventStore } from '../src/event-store/event-store.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus, waitUntil } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { type WholeService, startTestService, tempDir } from './support/service.js';

const JOB = { job_id: 'release-job', model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1 };

describe('a chunk run', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let client: OpenAI;
  let store: SqliteEventStore;
  /** Outcome appends are held while this is set, until it resolves. */
  let held: Promise<void> | undefined;
  let heldAppends = 0;

  beforeAll(async () => {
    await engine.start();
    const dataDir = tempDir('chunk-release');
    store = new SqliteEventStore(join(dataDir, 'events.sqlite'));
    // The real embedded log, but an append of line outcomes waits while `held` is set: a commit slow to reach the disk.
    const slowOutcomes = new Proxy(store, {
      get(target, name, receiver) {
        if (name === 'appendToStream') {
          return async (...args: Parameters<EventStore['appendToStream']>) => {
            if (held && args[0].startsWith('batchlines-')) {
              heldAppends += 1;
              await held;
            }
            return target.appendToStream(...args);
          };
        }
        const value: unknown = Reflect.get(target, name, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    service = await startTestService({
      dataDir,
      eventStore: slowOutcomes,
      env: { ENGINE_BASE_URL: engine.url, ENGINE_MODELS: 'tiny-chat', ENGINE_CONCURRENCY: '4', BATCH_CHUNK_LINES: '100', BATCH_PARALLEL_CHUNKS: '1' },
    });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect((await reserveJob(service.url, JOB)).status).toBe(201);
  });
  afterAll(async () => {
    await service.close();
    await engine.stop();
  });

  async function start(tag: string) {
    const input = await client.files.create({ file: await toFile(Buffer.from([0, 1, 2].map((n) => chatLine(`${tag}-${n}`, `${tag} line ${n}`)).join('\n')), 'input.jsonl'), purpose: 'batch' });
    return createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
  }

  it("gives its place to the next chunk once its lines are answered, while its outcomes are still being recorded; every line ends in the output once", async () => {
    let release!: () => void;
    held = new Promise<void>((resolve) => (release = resolve));
    // Released whatever happens: a service stopping with appends held would wait for them.
    onTestFinished(() => {
      held = undefined;
      release();
    });
    const first = await start('first');
    // One chunk at a time (BATCH_PARALLEL_CHUNKS=1): the first batch's lines are answered, and its outcomes wait on the log.
    await waitUntil(() => engine.texts.filter((text) => text.startsWith('first')).length === 3 && heldAppends > 0, 10_000);
    const second = await start('second');
    // The second batch's chunk runs meanwhile: its lines reach the engine with the first's append still held.
    await waitUntil(() => engine.texts.filter((text) => text.startsWith('second')).length === 3, 10_000);
    expect(engine.texts.filter((text) => text.startsWith('second'))).toHaveLength(3);
    expect(heldAppends).toBeGreaterThan(0);
    expect((await client.batches.retrieve(first.id)).request_counts?.completed).toBe(0);
    held = undefined;
    release();
    for (const batch of [first, second]) {
      const done = await waitForStatus(client, batch.id, ['completed', 'failed', 'expired', 'cancelled']);
      expect(done.status).toBe('completed');
      expect(done.request_counts).toMatchObject({ total: 3, completed: 3, failed: 0 });
      expect((await fileLines(client, done.output_file_id)).map((line) => line.custom_id).sort()).toEqual([0, 1, 2].map((n) => `${batch === first ? 'first' : 'second'}-${n}`));
    }
  });
});
