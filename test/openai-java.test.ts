import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeEngine } from './support/fake-engine.js';
import { reserveJob } from './support/batch-helpers.js';
import { buildOpenAiJavaClient, runOpenAiJavaClient } from './support/openai-java.js';
import { type WholeService, startTestService, tempDir } from './support/service.js';

const JOB = { job_id: 'java-strict', model: 'tiny-chat', use_case: 'strict clients', sla: '24h', price_1m_tokens: 1 };

/**
 * The official OpenAI Java SDK (test/java) with response validation on, calling .validate() on
 * every File, Batch, list page and deleted-file object it gets back, in every state it drives a
 * batch through. The first run fetches the SDK with Maven; later runs use the cache.
 */
describe('the official OpenAI Java SDK with strict validation', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let classPath: string;

  beforeAll(async () => {
    classPath = await buildOpenAiJavaClient();
    await engine.start();
    service = await startTestService({ env: { ENGINE_BASE_URL: engine.url, ENGINE_CONCURRENCY: '2', BATCH_CHUNK_LINES: '2' } });
    expect((await reserveJob(service.url, JOB)).status).toBe(201);
  }, 600_000);
  afterAll(async () => {
    await service?.close();
    await engine.stop();
  });

  it('drives files and batches end to end and every answer passes .validate()', async () => {
    const result = await runOpenAiJavaClient(classPath, [service.url, JOB.job_id, tempDir('openai-java')]);
    expect(result.stderr + result.stdout, 'the Java client failed').not.toMatch(/Exception|AssertionError/);
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout.trim().split('\n').pop() ?? '{}') as { validated: Record<string, number>; batch_states: string[] };
    // cancelling may pass between two polls; every other state is seen.
    expect(report.batch_states).toEqual(expect.arrayContaining(['validating', 'in_progress', 'completed', 'failed', 'cancelled']));
    for (const kind of ['file', 'file_list', 'batch', 'batch_list', 'file_deleted']) expect(report.validated[kind]).toBeGreaterThan(0);
  }, 240_000);
});
