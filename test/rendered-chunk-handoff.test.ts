import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BatchFinalizer } from '../processors/batch/batch-finalizer.js';
import { inLineOrder } from '../processors/batch/chunk-output-parts.js';
import { RenderedChunkHandoff } from '../processors/batch/rendered-chunk-handoff.js';
import { LineOutcomeLog } from '../src/application/line-outcomes.js';
import { renderChunk } from '../src/domain/batch-output.js';
import { FakeEngine } from './support/fake-engine.js';
import { chatLine, createBatch, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { type WholeService, startTestService } from './support/service.js';

describe('the rendered chunks handed from a run to the finalizer', () => {
  const parts = (output: string, error: string) => ({ output: Buffer.from(output), error: Buffer.from(error) });
  const text = (bytes: Buffer | undefined) => bytes?.toString('utf8');

  it('gives each file of a chunk once, and lets the chunk go once its output is taken and its error lines too, or it has none', () => {
    const handoff = new RenderedChunkHandoff();
    handoff.offer('batch_a', 0, parts('a\n', ''));
    handoff.offer('batch_b', 0, parts('b\n', 'e\n'));
    expect(handoff.take('batch_a', 1, 'output')).toBeUndefined();
    expect(text(handoff.take('batch_a', 0, 'output'))).toBe('a\n');
    expect(handoff.take('batch_a', 0, 'output')).toBeUndefined();
    expect(handoff.size).toBe(1);
    expect(text(handoff.take('batch_b', 0, 'error'))).toBe('e\n');
    expect(handoff.size).toBe(1);
    expect(text(handoff.take('batch_b', 0, 'output'))).toBe('b\n');
    expect(handoff.size).toBe(0);
    // A chunk whose every line failed: its output is empty, and still given.
    handoff.offer('batch_c', 0, parts('', 'x\n'));
    expect(text(handoff.take('batch_c', 0, 'error'))).toBe('x\n');
    expect(text(handoff.take('batch_c', 0, 'output'))).toBe('');
    expect(handoff.size).toBe(0);
  });

  it('holds at most its limits in bytes, dropping the oldest chunks first', () => {
    const handoff = new RenderedChunkHandoff({ bytes: 10, chunks: 3 });
    for (let batch = 0; batch < 5; batch++) handoff.offer(`batch_${batch}`, 0, parts('ab', ''));
    expect(handoff.size).toBe(3);
    expect(handoff.take('batch_1', 0, 'output')).toBeUndefined();
    expect(text(handoff.take('batch_4', 0, 'output'))).toBe('ab');
    // Nine bytes in five characters: the limit is the bytes held.
    handoff.offer('batch_big', 0, parts('xxxé', 'é'));
    expect(handoff.take('batch_2', 0, 'output')).toBeUndefined();
    expect(text(handoff.take('batch_big', 0, 'output'))).toBe('xxxé');
    // Larger than the whole limit (eleven bytes in six characters): not held at all.
    handoff.offer('batch_huge', 0, parts('xxxxxé', 'éé'));
    expect(handoff.take('batch_huge', 0, 'output')).toBeUndefined();
  });
});

describe('a batch of one chunk, run and finalized in one process', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let client: OpenAI;
  const rendered = vi.spyOn(BatchFinalizer.prototype as unknown as { outcomesOf: (batchId: string) => Promise<unknown> }, 'outcomesOf');

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({ env: { ENGINE_BASE_URL: engine.url, ENGINE_MAX_ATTEMPTS: '1', BATCH_CHUNK_LINES: '100' } });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect((await reserveJob(service.url, { job_id: 'one-chunk-job', model: 'tiny-chat', use_case: 'one chunk', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
  });
  afterAll(async () => {
    await service.close();
    await engine.stop();
    rendered.mockRestore();
  });

  it('is finalized from what its run rendered, without reading its outcomes back, into the bytes rendering the outcomes gives', async () => {
    for (const failing of [false, true]) {
      const lines = Array.from({ length: 7 }, (_, index) => (failing && index % 3 === 1 ? chatLine(`bad-${index}`, 'refuse [fail:400]') : chatLine(`ok-${index}`, `hello ${index}`)));
      const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'one-chunk.jsonl'), purpose: 'batch' });
      const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'one-chunk-job' });
      const done = await waitForStatus(client, created.id, ['completed', 'failed']);
      expect(done.status).toBe('completed');
      expect(done.request_counts).toEqual({ completed: failing ? 5 : 7, failed: failing ? 2 : 0, total: 7 });
      expect(rendered.mock.calls.filter(([batchId]) => batchId === created.id)).toEqual([]);

      const outcomes = inLineOrder(await new LineOutcomeLog(service.eventStore).read(created.id, 0));
      const download = async (id: string | null | undefined) => Buffer.from(await (await client.files.content(id!)).arrayBuffer()).toString();
      expect(await download(done.output_file_id)).toBe(renderChunk(created.id, 'output', outcomes));
      if (failing) expect(await download(done.error_file_id)).toBe(renderChunk(created.id, 'error', outcomes));
      else expect(done.error_file_id).toBeNull();
    }
  });
});
