import { randomUUID } from 'node:crypto';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { chatLine, createBatch, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { TEST_API_KEY, type WholeService, startTestService } from './support/service.js';
import { runSpool } from './support/spool-cli.js';

const JOB = { job_id: 'audit-job', model: 'tiny-chat', use_case: 'audit', sla: '24h', price_1m_tokens: 1 };

interface HistoryEvent {
  object: string;
  id: string;
  type: string;
  stream: string;
  revision: number;
  position: string;
  recorded_at: number;
  created_at: number;
  data: Record<string, unknown>;
  correlation_id: string | null;
  request_id: string | null;
}

const positionOf = (event: HistoryEvent) => event.position.split('/').map(BigInt) as [bigint, bigint];
const after = (a: HistoryEvent, b: HistoryEvent) => {
  const [ac, ap] = positionOf(a);
  const [bc, bp] = positionOf(b);
  return ac > bc || (ac === bc && ap > bp);
};

describe('the audit trail and replay', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let client: OpenAI;

  const history = async (path: string, query = ''): Promise<{ status: number; body: any }> => {
    const answer = await fetch(`${service.url}${path}${query}`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    return { status: answer.status, body: await answer.json() };
  };

  /** Every page, following after/has_more. */
  const allPages = async (path: string, limit: number) => {
    const events: HistoryEvent[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const { status, body } = await history(path, `?limit=${limit}${cursor ? `&after=${cursor}` : ''}`);
      expect(status).toBe(200);
      expect(body.object).toBe('list');
      expect(body.data.length).toBeLessThanOrEqual(limit);
      events.push(...body.data);
      pages++;
      if (!body.has_more) return { events, pages };
      expect(body.last_id).toBe(body.data[body.data.length - 1].id);
      cursor = body.last_id;
    }
  };

  const submit = async (lines: string[]) => {
    const input = await client.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'audit.jsonl'), purpose: 'batch' });
    return createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
  };

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({ env: { ENGINE_BASE_URL: engine.url, ENGINE_BACKOFF_MS: '10', ENGINE_MAX_ATTEMPTS: '2', ENGINE_CONCURRENCY: '2', BATCH_CHUNK_LINES: '3' } });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect((await reserveJob(service.url, JOB)).status).toBe(201);
  });
  afterAll(async () => {
    await service?.close();
    await engine.stop();
  });

  it("pages through a batch's whole history, line outcomes included, in log order", async () => {
    const lines = Array.from({ length: 7 }, (_, index) => chatLine(`r${index}`, index === 4 ? 'no [fail:400]' : `hello ${index}`));
    const batch = await submit(lines);
    const done = await waitForStatus(client, batch.id, ['completed']);
    const { events, pages } = await allPages(`/v1/batches/${batch.id}/events`, 4);

    expect(pages).toBe(3);
    expect(events).toHaveLength(11);
    expect(events.map((event) => event.type).filter((type) => !type.startsWith('Line'))).toEqual(['BatchCreated', 'BatchValidated', 'BatchFinalizing', 'BatchCompleted']);
    const outcomes = events.slice(2, 9);
    for (const outcome of outcomes) expect(['LineCompleted', 'LineFailed']).toContain(outcome.type);
    expect(outcomes.filter((event) => event.type === 'LineCompleted')).toHaveLength(6);
    expect(outcomes.filter((event) => event.type === 'LineFailed').map((event) => event.data.custom_id)).toEqual(['r4']);
    expect(new Set(outcomes.map((event) => event.data.line)).size).toBe(7);
    expect(new Set(outcomes.map((event) => event.stream))).toEqual(new Set([`batchlines-${batch.id}-0`, `batchlines-${batch.id}-1`, `batchlines-${batch.id}-2`]));
    for (let index = 1; index < events.length; index++) expect(after(events[index]!, events[index - 1]!)).toBe(true);
    expect(events[0]).toMatchObject({ object: 'event', stream: `batch-${batch.id}`, revision: 0, data: { batch_id: batch.id, input_file_id: batch.input_file_id } });
    expect(events[0]!.request_id).toEqual(expect.any(String));
    expect(events[10]).toMatchObject({ type: 'BatchCompleted', data: { output_file_id: done.output_file_id, error_file_id: done.error_file_id } });
    expect(events[10]!.correlation_id).toBe('batch-finalizer');
    expect(events[10]!.created_at).toBe(Math.floor(events[10]!.recorded_at / 1000));
    expect(new Set(events.map((event) => event.id)).size).toBe(events.length);
  });

  it("shows a file's history, and refuses unknown subjects and cursors clearly", async () => {
    const file = await client.files.create({ file: await toFile(Buffer.from(`${chatLine('x', 'y')}\n`), 'gone.jsonl'), purpose: 'batch' });
    await client.files.delete(file.id);
    const { events } = await allPages(`/v1/files/${file.id}/events`, 10);
    expect(events.map((event) => event.type)).toEqual(['FileUploaded', 'FileDeleted']);
    expect(events[0]!.data).toMatchObject({ file_id: file.id, filename: 'gone.jsonl', purpose: 'batch' });

    const unknown = await history('/v1/batches/batch_doesnotexist/events');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ type: 'invalid_request_error', param: 'batch_id' });
    const badCursor = await history(`/v1/files/${file.id}/events`, `?after=${randomUUID()}`);
    expect(badCursor.status).toBe(400);
    expect(badCursor.body.error).toMatchObject({ param: 'after' });
    const badLimit = await history(`/v1/files/${file.id}/events`, '?limit=1001');
    expect(badLimit.status).toBe(422); // query and path parameters are checked as FastAPI-style 422s (docs/API.md)
    expect((await history('/mgmt/v1/weights/spool-tiny/events')).status).toBe(404);
    const anonymous = await fetch(`${service.url}/mgmt/v1/weights/spool-tiny/events`);
    expect(anonymous.status).toBe(401);
  });

  it('spool replay rebuilds identical read models after completed, failed and cancelled batches, and notices a difference', async () => {
    const completed = await submit([chatLine('a', 'one'), chatLine('b', 'two [fail:400]')]);
    const failed = await submit([chatLine('a', 'one'), '{"custom_id": broken']);
    const cancelled = await submit(Array.from({ length: 12 }, (_, index) => chatLine(`c${index}`, `slow ${index} [slow:150]`)));
    await waitForStatus(client, cancelled.id, ['in_progress']);
    await client.batches.cancel(cancelled.id);
    expect((await waitForStatus(client, completed.id, ['completed'])).status).toBe('completed');
    expect((await waitForStatus(client, failed.id, ['failed'])).status).toBe('failed');
    expect((await waitForStatus(client, cancelled.id, ['cancelled'])).status).toBe('cancelled');

    // The service keeps running: replay compares against a snapshot of its live read models.
    const env = { DATA_DIR: service.dataDir, LOG_LEVEL: 'silent' };
    const same = await runSpool(['replay'], env);
    expect(same.code, same.stderr).toBe(0);
    const report = JSON.parse(same.stdout) as { identical: boolean; events: number; tables: Record<string, number>; differences: unknown[] };
    expect(report.identical).toBe(true);
    expect(report.differences).toEqual([]);
    expect(report.events).toBeGreaterThan(40);
    expect(report.tables.batches).toBeGreaterThanOrEqual(4);
    expect(report.tables.history).toBe(report.events - (report.tables.jobs ?? 0));
    expect(same.stderr).toContain('the read models are identical');

    // A read model that drifted from the log is caught.
    await service.close();
    const live = new Database(join(service.dataDir, 'read-models.sqlite'));
    live.prepare("UPDATE batches SET status = 'completed' WHERE id = ?").run(cancelled.id);
    live.close();
    const different = await runSpool(['replay'], env);
    expect(different.code).toBe(1);
    const drift = JSON.parse(different.stdout) as { identical: boolean; differences: Array<{ table: string; firstDifference: { live: { status: string }; replayed: { status: string } } }> };
    expect(drift.identical).toBe(false);
    expect(drift.differences).toHaveLength(1);
    expect(drift.differences[0]).toMatchObject({ table: 'batches', firstDifference: { live: { status: 'completed' }, replayed: { status: 'cancelled' } } });
  });
});
