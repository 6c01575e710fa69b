import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatLine, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { ManualClock, TEST_API_KEY, type WholeService, startTestService } from './support/service.js';

const JOB = { job_id: 'deadline-job', model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1 };
type CreateParams = Parameters<OpenAI['batches']['create']>[0];
interface AuditEvent {
  type: string;
  data: Record<string, number | string>;
}

describe('deadline risk', () => {
  const engine = new FakeEngine();
  const clock = new ManualClock();
  let service: WholeService;
  let client: OpenAI;

  const auditTrail = async (batchId: string): Promise<AuditEvent[]> => {
    const answer = await fetch(`${service.url}/v1/batches/${batchId}/events?limit=100`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    expect(answer.status).toBe(200);
    return ((await answer.json()) as { data: AuditEvent[] }).data;
  };
  const risks = async (batchId: string) => (await auditTrail(batchId)).filter((event) => event.type === 'BatchDeadlineAtRisk');

  /** Starts a batch and waits, in real time, until at least `settled` of its lines have settled. */
  async function startBatch(lines: string[], settled: number) {
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'input.jsonl'), purpose: 'batch' });
    const batch = await client.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id } as unknown as CreateParams);
    const until = Date.now() + 20_000;
    for (;;) {
      const now = await client.batches.retrieve(batch.id);
      const counts = now.request_counts!;
      if (counts.completed + counts.failed >= settled) return now;
      if (Date.now() > until) throw new Error(`batch ${batch.id} settled ${counts.completed + counts.failed} lines, not ${settled}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({
      clock,
      env: { ENGINE_BASE_URL: engine.url, ENGINE_MODELS: 'tiny-chat', ENGINE_BACKOFF_MS: '10', ENGINE_CONCURRENCY: '2', BATCH_CHUNK_LINES: '4', BATCH_PARALLEL_CHUNKS: '1' },
    });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect((await reserveJob(service.url, JOB)).status).toBe(201);
  });
  afterAll(async () => {
    await service.close();
    await engine.stop();
  });

  it('flags, once, a batch that at its rate finishes past its expires_at: the audit trail shows the estimate', async () => {
    // 12 lines of 1 s at concurrency 2: about 6 s of real time, in which the clock jumps 50 minutes
    // with only a few lines settled: 10 lines left at that pace take hours, the SLA gives one.
    const lines = Array.from({ length: 12 }, (_, index) => chatLine(`r-${index}`, `slowly [slow:1000] ${index}`));
    const running = await startBatch(lines, 2);
    expect(running.expires_at).toBe(running.created_at + 3600);
    clock.advance(3000);
    const until = Date.now() + 15_000;
    while ((await risks(running.id)).length === 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100));
    const [flag] = await risks(running.id);
    expect(flag?.data).toEqual({
      batch_id: running.id,
      at: running.created_at + 3000,
      estimated_completion_at: expect.any(Number),
      lines_done: expect.any(Number),
      lines_total: 12,
      lines_per_second: expect.any(Number),
    });
    const { estimated_completion_at, lines_done, lines_per_second } = flag!.data as { estimated_completion_at: number; lines_done: number; lines_per_second: number };
    expect(estimated_completion_at).toBeGreaterThan(running.expires_at!);
    expect(lines_done).toBeGreaterThanOrEqual(2);
    expect(estimated_completion_at).toBe(running.created_at + 3000 + Math.ceil((12 - lines_done) / lines_per_second));
    // The batch runs on: the flag changes nothing but the record.
    const done = await waitForStatus(client, running.id, ['completed', 'expired', 'failed', 'cancelled']);
    expect(done.status).toBe('completed');
    // Checked every second while it ran, its estimate only improved: one flag, not one per check.
    expect(await risks(running.id)).toHaveLength(1);
  });

  it('does not flag a batch that at its rate finishes before its expires_at', async () => {
    // The same 50-minute jump, but by then 20 of 21 lines settled: the last takes minutes at that pace.
    const lines = [...Array.from({ length: 20 }, (_, index) => chatLine(`q-${index}`, `quick ${index}`)), chatLine('q-slow', 'slowly [slow:3000] last')];
    const running = await startBatch(lines, 20);
    clock.advance(3000);
    const done = await waitForStatus(client, running.id, ['completed', 'expired', 'failed', 'cancelled']);
    expect(done.status).toBe('completed');
    expect(await risks(running.id)).toEqual([]);
    expect((await auditTrail(running.id)).filter((event) => !event.type.startsWith('Line')).map((event) => event.type)).toEqual([
      'BatchCreated',
      'BatchValidated',
      'BatchFinalizing',
      'BatchCompleted',
    ]);
  });
});
