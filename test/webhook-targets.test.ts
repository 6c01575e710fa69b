import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutboundTargets } from '../src/platform/outbound-targets.js';
import { FakeEngine } from './support/fake-engine.js';
import { chatLine, createBatch, reserveJob, waitFor, waitForStatus } from './support/batch-helpers.js';
import { TEST_API_KEY, type WholeService, startTestService } from './support/service.js';

describe('which addresses an account’s webhook may reach', () => {
  it('refuses loopback, link-local, private, shared, multicast and reserved addresses, mapped IPv6 too, unless allowed', () => {
    const targets = new OutboundTargets();
    for (const inward of ['127.0.0.1', '127.9.9.9', '10.1.2.3', '169.254.169.254', '172.16.5.5', '172.31.255.255', '192.168.1.1', '100.64.0.1', '0.0.0.0', '224.0.0.1', '::1', '::', 'fe80::1', 'fc00::1', 'fd12::3', '::ffff:127.0.0.1', '::ffff:169.254.169.254', '[::1]']) {
      expect(targets.refusal(inward), inward).toMatch(/loopback, link-local, private or reserved/);
    }
    for (const outward of ['8.8.8.8', '172.32.0.1', '198.51.100.7', '2001:4860:4860::8888', '::ffff:8.8.8.8']) expect(new OutboundTargets([], []).refusal(outward), outward).toBeUndefined();
    const allowing = new OutboundTargets(['127.0.0.2', '10.20.0.0/16', 'hooks.internal']);
    expect(allowing.refusal('127.0.0.2')).toBeUndefined();
    expect(allowing.refusal('127.0.0.1')).toBeDefined();
    expect(allowing.refusal('10.20.3.4')).toBeUndefined();
    expect(allowing.refusal('10.21.3.4')).toBeDefined();
    expect(allowing.allowsHost('Hooks.Internal')).toBe(true);
    expect(allowing.allowsHost('other.internal')).toBe(false);
    // This machine's own addresses, public ones too.
    const own = new OutboundTargets([], ['203.0.113.9']);
    expect(own.refusal('203.0.113.9')).toMatch(/one of this machine's/);
    expect(own.refusal('203.0.113.10')).toBeUndefined();
  });
});

/** A loopback server that counts what it is sent; `answer` decides the response. */
async function receiver(host: string, answer: (response: import('node:http').ServerResponse) => void = (response) => response.writeHead(200).end()) {
  const received: string[] = [];
  const server: Server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      received.push(body);
      answer(response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return { url: `http://${host}:${port}/hook`, port, received, close: () => new Promise((resolve) => server.close(resolve)) };
}

/**
 * Accounts register their own webhooks (ACCOUNTS=required). Servers on loopback stand for the
 * operator's network: the one at 127.0.0.1 must never receive a request, however it is aimed at
 * (an address, a name, a redirect, a name that resolves elsewhere when registered). The one at
 * 127.0.0.2 is allowed by WEBHOOK_ALLOWED_TARGETS and stands for a receiver outside.
 */
describe('account webhooks: their own batches only, and never a way inward', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let inner: Awaited<ReturnType<typeof receiver>>;
  let outside: Awaited<ReturnType<typeof receiver>>;
  let redirecting: Awaited<ReturnType<typeof receiver>>;
  const keys: Record<string, string> = {};

  const as = (key: string, path: string, init: RequestInit = {}) =>
    fetch(`${service.url}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, ...(init.body ? { 'content-type': 'application/json' } : {}) } });
  const register = (key: string, url: string) => as(key, '/v1/webhooks', { method: 'POST', body: JSON.stringify({ url, events: ['batch.completed'] }) });
  const runBatch = async (account: string) => {
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: keys[account]!, maxRetries: 0 });
    const input = await client.files.create({ file: await toFile(Buffer.from(chatLine(`${account}-1`, 'fine')), 'in.jsonl'), purpose: 'batch' });
    const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: `${account}-job` });
    return (await waitForStatus(client, created.id, ['completed', 'failed'])).id;
  };
  const attempts = async (webhookId: string) => {
    const history = (await (await fetch(`${service.url}/mgmt/v1/webhooks/${webhookId}/events?limit=100`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).json()) as { data: Array<{ type: string; data: { status_code: number | null; error: string | null } }> };
    return history.data.filter((event) => event.type === 'WebhookDeliveryAttempted').map((event) => event.data);
  };

  beforeAll(async () => {
    await engine.start();
    inner = await receiver('127.0.0.1');
    outside = await receiver('127.0.0.2');
    redirecting = await receiver('127.0.0.2', (response) => response.writeHead(302, { location: inner.url }).end());
    service = await startTestService({ env: { ACCOUNTS: 'required', ENGINE_BASE_URL: engine.url, WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_ALLOWED_TARGETS: '127.0.0.2' } });
    for (const account of ['alpha', 'beta']) {
      const opened = await fetch(`${service.url}/mgmt/v1/accounts`, { method: 'POST', headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ account_id: account }) });
      keys[account] = ((await opened.json()) as { key: string }).key;
      expect((await reserveJob(service.url, { job_id: `${account}-job`, model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1, account_id: account })).status).toBe(201);
    }
  });
  afterAll(async () => {
    await service?.close();
    await engine.stop();
    await Promise.all([inner, outside, redirecting].map((server) => server?.close()));
  });

  it('refuses at registration a URL aimed inward, by address or by name, naming why', async () => {
    const port = inner.port;
    for (const url of [inner.url, `http://localhost:${port}/`, `http://[::1]:${port}/`, `http://[::ffff:127.0.0.1]:${port}/`, 'http://169.254.169.254/latest/meta-data/', `http://10.0.0.1:${port}/`, `http://0.0.0.0:${port}/`]) {
      const response = await register(keys.alpha!, url);
      expect(response.status, url).toBe(400);
      expect(await response.json()).toMatchObject({ error: { code: 'webhook_target_refused', param: 'url' } });
    }
    expect(inner.received).toHaveLength(0);
  });

  it("delivers an account's batches to its own webhook only, follows no redirect, and another account cannot remove it", async () => {
    const created = await register(keys.alpha!, outside.url);
    expect(created.status).toBe(201);
    const webhook = (await created.json()) as { id: string; account_id: string; secret: string };
    expect(webhook).toMatchObject({ account_id: 'alpha', secret: expect.stringMatching(/^whsec_/) });
    const redirected = (await (await register(keys.alpha!, redirecting.url)).json()) as { id: string };
    expect((await as(keys.beta!, `/v1/webhooks/${webhook.id}`, { method: 'DELETE' })).status).toBe(404);
    expect(((await (await as(keys.beta!, '/v1/webhooks')).json()) as { data: unknown[] }).data).toEqual([]);

    const betaBatch = await runBatch('beta');
    const alphaBatch = await runBatch('alpha');
    await waitFor(async () => outside.received.length >= 1 && (await attempts(redirected.id)).length >= 1, 'the deliveries to alpha’s webhooks');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(outside.received.map((body) => (JSON.parse(body) as { data: { id: string } }).data.id)).toEqual([alphaBatch]);
    expect(outside.received.join('')).not.toContain(betaBatch);
    // The redirect was answered, not followed: its 302 recorded, nothing sent inward.
    expect((await attempts(redirected.id))[0]).toMatchObject({ status_code: 302 });
    expect(inner.received).toHaveLength(0);
  });

  // A name that resolves outward when the webhook is registered and inward when it is delivered:
  // the delivery checks the address it connects to. The name is made in /etc/hosts (root only).
  const hostsWritable = (() => {
    try {
      appendFileSync('/etc/hosts', '');
      return true;
    } catch {
      return false;
    }
  })();
  it.skipIf(!hostsWritable)('refuses at delivery a name that has come to resolve inward since it was registered (needs a writable /etc/hosts)', async () => {
    const name = `rebind-${randomBytes(4).toString('hex')}.spool-test`;
    const hosts = readFileSync('/etc/hosts', 'utf8');
    try {
      writeFileSync('/etc/hosts', `${hosts.trimEnd()}\n198.51.100.7 ${name}\n`);
      const created = await register(keys.beta!, `http://${name}:${inner.port}/hook`);
      expect(created.status).toBe(201);
      const webhook = (await created.json()) as { id: string };
      writeFileSync('/etc/hosts', `${hosts.trimEnd()}\n127.0.0.1 ${name}\n`);
      await runBatch('beta');
      await waitFor(async () => (await attempts(webhook.id)).length >= 1, 'a delivery attempt');
      expect((await attempts(webhook.id))[0]).toMatchObject({ status_code: null, error: expect.stringMatching(/TargetRefusedError: .*resolves to 127\.0\.0\.1 is a loopback/) });
      expect(inner.received).toHaveLength(0);
    } finally {
      writeFileSync('/etc/hosts', hosts);
    }
  });
});
