import { type IncomingHttpHeaders, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeEngine } from './support/fake-engine.js';
import { chatLine, createBatch, reserveJob, waitForStatus, waitUntil } from './support/batch-helpers.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir } from './support/service.js';

const JOB = { job_id: 'hooks-job', model: 'tiny-chat', use_case: 'webhooks', sla: '24h', price_1m_tokens: 1 };

interface Received {
  readonly body: string;
  readonly headers: IncomingHttpHeaders;
}

/** A receiver on 127.0.0.1 that records every delivery and answers the statuses it is given, then 200. */
class Receiver {
  readonly received: Received[] = [];
  private server: Server | undefined;
  constructor(private readonly statuses: number[] = []) {}

  async start(port = 0): Promise<void> {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        this.received.push({ body: Buffer.concat(chunks).toString('utf8'), headers: request.headers });
        response.statusCode = this.statuses.shift() ?? 200;
        response.end('ok');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
  }

  get port(): number {
    return (this.server!.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  async waitFor(count: number, timeoutMs = 20_000): Promise<Received[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.received.length < count) {
      if (Date.now() > deadline) throw new Error(`the receiver got ${this.received.length} deliveries, not ${count}, in ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    return this.received;
  }
}

const mgmt = (url: string, path: string, init: RequestInit = {}, token: string | null = TEST_API_KEY) =>
  fetch(`${url}/mgmt/v1${path}`, { ...init, headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(init.body ? { 'content-type': 'application/json' } : {}) } });

async function registerWebhook(url: string, body: Record<string, unknown>): Promise<{ id: string; secret: string; url: string; events: string[] }> {
  const answer = await mgmt(url, '/webhooks', { method: 'POST', body: JSON.stringify(body) });
  expect(answer.status).toBe(201);
  return (await answer.json()) as { id: string; secret: string; url: string; events: string[] };
}

async function runBatch(service: WholeService, lines: string[], until: string[]): Promise<string> {
  const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
  const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'in.jsonl'), purpose: 'batch' });
  const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
  await waitForStatus(client, batch.id, until);
  return batch.id;
}

async function auditTrail(url: string, webhookId: string): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
  const answer = await mgmt(url, `/webhooks/${webhookId}/events?limit=100`);
  expect(answer.status).toBe(200);
  return ((await answer.json()) as { data: Array<{ type: string; data: Record<string, unknown> }> }).data;
}

const unwrap = (received: Received, secret: string) => new OpenAI({ apiKey: 'x', webhookSecret: secret }).webhooks.unwrap(received.body, received.headers as Record<string, string>, secret);

describe('webhooks, delivered as OpenAI sends them', () => {
  const engine = new FakeEngine();
  const dataDir = tempDir('webhooks');
  const env = { BATCH_CHUNK_LINES: '5', WEBHOOK_RETRY_BASE_MS: '100' };
  let service: WholeService;

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({ dataDir, env: { ...env, ENGINE_BASE_URL: engine.url } });
    expect((await reserveJob(service.url, JOB)).status).toBe(201);
  });
  afterAll(async () => {
    await service.close();
    await engine.stop();
  });

  it('refuses every webhook route without the token, and a URL that is not http(s)', async () => {
    expect((await mgmt(service.url, '/webhooks', {}, null)).status).toBe(401);
    expect((await mgmt(service.url, '/webhooks', { method: 'POST', body: JSON.stringify({ url: 'http://127.0.0.1:1/x' }) }, null)).status).toBe(401);
    expect((await mgmt(service.url, '/webhooks/wh_x', { method: 'DELETE' }, null)).status).toBe(401);
    const ftp = await mgmt(service.url, '/webhooks', { method: 'POST', body: JSON.stringify({ url: 'ftp://127.0.0.1/x' }) });
    expect(ftp.status).toBe(400);
    expect(((await ftp.json()) as { error: { message: string } }).error.message).toMatch(/http or https/);
    const unknown = await mgmt(service.url, '/webhooks', { method: 'POST', body: JSON.stringify({ url: 'http://127.0.0.1:1/x', events: ['batch.started'] }) });
    expect(unknown.status).toBeGreaterThanOrEqual(400);
    expect(unknown.status).toBeLessThan(500);
  });

  it('delivers one signed event per terminal transition that the openai client unwraps; retries a 500; shows the attempts', async () => {
    const receiver = new Receiver([500]);
    const failedOnly = new Receiver();
    await receiver.start();
    await failedOnly.start();
    try {
      const hook = await registerWebhook(service.url, { url: receiver.url });
      expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
      expect(hook.events.sort()).toEqual(['batch.cancelled', 'batch.completed', 'batch.expired', 'batch.failed']);
      const quiet = await registerWebhook(service.url, { url: failedOnly.url, events: ['batch.failed'] });

      const batchId = await runBatch(service, [chatLine('a', 'hi'), chatLine('b', 'there')], ['completed']);
      const [first, second] = await receiver.waitFor(2);
      // The first answer was 500: the same event, same id, was sent again.
      for (const received of [first!, second!]) {
        const event = (await unwrap(received, hook.secret)) as unknown as Record<string, unknown>;
        expect(event).toMatchObject({ object: 'event', type: 'batch.completed', data: { id: batchId } });
        expect(event.id).toMatch(/^evt_/);
        expect(received.headers['webhook-id']).toBe(event.id);
      }
      expect(first!.headers['webhook-id']).toBe(second!.headers['webhook-id']);
      // A wrong secret is refused by the same client: the signature is real.
      await expect(unwrap(second!, quiet.secret)).rejects.toThrow(/signature/);

      // Nothing more once delivered, and nothing for a webhook that listens for failures only.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(receiver.received).toHaveLength(2);
      expect(failedOnly.received).toHaveLength(0);

      const trail = await auditTrail(service.url, hook.id);
      expect(trail.map((event) => event.type)).toEqual(['WebhookRegistered', 'WebhookDeliveryAttempted', 'WebhookDeliveryAttempted', 'WebhookDelivered']);
      expect(trail.map((event) => event.data.status_code ?? null)).toEqual([null, 500, 200, null]);
      expect(trail[0]!.data).not.toHaveProperty('secret');
      expect(trail[1]!.data.next_attempt_at).toEqual(expect.any(Number));

      // The list hides secrets; delete removes one.
      const listed = (await (await mgmt(service.url, '/webhooks')).json()) as { data: Array<Record<string, unknown>> };
      expect(listed.data.map((row) => row.id)).toEqual(expect.arrayContaining([hook.id, quiet.id]));
      for (const row of listed.data) expect(row).not.toHaveProperty('secret');
      for (const id of [hook.id, quiet.id]) expect((await mgmt(service.url, `/webhooks/${id}`, { method: 'DELETE' })).status).toBe(200);
      expect((await mgmt(service.url, `/webhooks/${hook.id}`, { method: 'DELETE' })).status).toBe(404);
      const after = (await (await mgmt(service.url, '/webhooks')).json()) as { data: Array<Record<string, unknown>> };
      expect(after.data.map((row) => row.id)).not.toContain(hook.id);

      // A removed webhook hears nothing more.
      await runBatch(service, [chatLine('c', 'again')], ['completed']);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(receiver.received).toHaveLength(2);
    } finally {
      await receiver.stop();
      await failedOnly.stop();
    }
  });

  it('delivers batch.failed to a webhook that listens for it', async () => {
    const receiver = new Receiver();
    await receiver.start();
    try {
      const hook = await registerWebhook(service.url, { url: receiver.url, events: ['batch.failed'] });
      const batchId = await runBatch(service, ['{"not": "a request line"}'], ['failed']);
      const [received] = await receiver.waitFor(1);
      expect(await unwrap(received!, hook.secret)).toMatchObject({ type: 'batch.failed', data: { id: batchId } });
      expect((await mgmt(service.url, `/webhooks/${hook.id}`, { method: 'DELETE' })).status).toBe(200);
    } finally {
      await receiver.stop();
    }
  });

  it('resumes a pending delivery after a restart', async () => {
    // A receiver that is not there yet: its port is taken, then let go.
    const placeholder = new Receiver();
    await placeholder.start();
    const port = placeholder.port;
    const url = placeholder.url;
    await placeholder.stop();
    const hook = await registerWebhook(service.url, { url });
    const batchId = await runBatch(service, [chatLine('d', 'restart')], ['completed']);
    const deadline = Date.now() + 10_000;
    while (!(await auditTrail(service.url, hook.id)).some((event) => event.type === 'WebhookDeliveryAttempted')) {
      if (Date.now() > deadline) throw new Error('no failed attempt was recorded');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await service.close();

    const receiver = new Receiver();
    await receiver.start(port);
    try {
      service = await startTestService({ dataDir, env: { ...env, ENGINE_BASE_URL: engine.url } });
      const [received] = await receiver.waitFor(1);
      expect(await unwrap(received!, hook.secret)).toMatchObject({ type: 'batch.completed', data: { id: batchId } });
      // The delivery is recorded once the receiver's answer is back, a moment after it got the request.
      await waitUntil(async () => (await auditTrail(service.url, hook.id)).at(-1)?.type === 'WebhookDelivered');
      const trail = await auditTrail(service.url, hook.id);
      expect(trail.at(-1)!.type).toBe('WebhookDelivered');
      expect(trail.filter((event) => event.type === 'WebhookDeliveryAttempted').at(0)!.data.status_code).toBeNull();
    } finally {
      await receiver.stop();
    }
  });
});
