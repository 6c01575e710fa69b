import { existsSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { createLogger } from '../src/observability/log-format.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiExposure } from '../src/wiring/exposure.js';
import { FakeEngine } from './support/fake-engine.js';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { TEST_API_KEY, type WholeService, startTestService } from './support/service.js';

/** Each account's job: a batch may use only its own account's. */
const jobOf = (accountId: string) => ({ job_id: `${accountId}-summaries`, model: 'tiny-chat', use_case: 'summaries', sla: '24h', price_1m_tokens: 1, account_id: accountId });

interface Issued {
  readonly account_id: string;
  readonly key_id: string;
  readonly key: string;
}

/** What one account made: a batch that ran, its input, output and error files, and a file of another purpose. */
interface Objects {
  readonly client: OpenAI;
  readonly key: Issued;
  readonly inputFileId: string;
  readonly otherFileId: string;
  readonly batchId: string;
  readonly outputFileId: string;
  readonly errorFileId: string;
  readonly webhookId: string;
}

/**
 * Accounts required (ACCOUNTS=required), through the real service over HTTP with the official
 * openai client: two accounts each make files and a batch with output and error files, and every
 * `/v1` endpoint is asked, with one account's key, about every object of the other's.
 */
describe('accounts: keys, and isolation of every /v1 object', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  const accounts: Record<'alpha' | 'beta', Objects> = {} as never;
  /** Every line the service logs, at every level. */
  const logs: string[] = [];
  const issued: string[] = [];

  const mgmt = (path: string, init: RequestInit = {}) =>
    fetch(`${service.url}/mgmt/v1${path}`, { ...init, headers: { authorization: `Bearer ${TEST_API_KEY}`, ...(init.body ? { 'content-type': 'application/json' } : {}), ...(init.headers ?? {}) } });
  const as = (key: string | undefined, path: string, init: RequestInit = {}) =>
    fetch(`${service.url}${path}`, { ...init, headers: { ...(key === undefined ? {} : { authorization: `Bearer ${key}` }), ...(init.body ? { 'content-type': 'application/json' } : {}), ...(init.headers ?? {}) } });

  const open = async (accountId: string): Promise<Issued> => {
    const response = await mgmt('/accounts', { method: 'POST', body: JSON.stringify({ account_id: accountId }) });
    expect(response.status).toBe(201);
    const key = (await response.json()) as Issued;
    issued.push(key.key);
    return key;
  };

  const makeObjects = async (accountId: string): Promise<Objects> => {
    const key = await open(accountId);
    expect((await reserveJob(service.url, jobOf(accountId))).status).toBe(201);
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: key.key, maxRetries: 0 });
    const lines = [chatLine(`${accountId}-ok`, 'fine'), chatLine(`${accountId}-refused`, 'please [fail:400]')];
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), `${accountId}.jsonl`), purpose: 'batch' });
    const other = await client.files.create({ file: await toFile(Buffer.from('notes'), `${accountId}-notes.txt`), purpose: 'user_data' });
    const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: jobOf(accountId).job_id });
    const done = await waitForStatus(client, created.id, ['completed', 'failed']);
    expect(done.status).toBe('completed');
    expect(done.output_file_id && done.error_file_id).toBeTruthy();
    // A webhook of its own (for expiries, which none of these batches meets: nothing is sent).
    const webhook = await as(key.key, '/v1/webhooks', { method: 'POST', body: JSON.stringify({ url: 'http://198.51.100.7/hook', events: ['batch.expired'] }) });
    expect(webhook.status).toBe(201);
    const webhookId = ((await webhook.json()) as { id: string }).id;
    return { client, key, inputFileId: input.id, otherFileId: other.id, batchId: done.id, outputFileId: done.output_file_id!, errorFileId: done.error_file_id!, webhookId };
  };

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({ env: { ACCOUNTS: 'required', ENGINE_BASE_URL: engine.url, ENGINE_MAX_ATTEMPTS: '1', BATCH_CHUNK_LINES: '1' }, logger: createLogger({ level: 'trace', format: 'json' }, { write: (line: string) => void logs.push(line) }) });
    // A job named for no account is no account's: with accounts required no batch may use it.
    expect((await reserveJob(service.url, { ...jobOf('x'), job_id: 'nobodys', account_id: undefined })).status).toBe(201);
    accounts.alpha = await makeObjects('alpha');
    accounts.beta = await makeObjects('beta');
  });
  afterAll(async () => {
    await service.close();
    await engine.stop();
  });

  it('refuses /v1 without a key, with an unknown one, and with the operator key (401, in the envelope)', async () => {
    for (const key of [undefined, 'sk-spool-000000000000000000000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', wrongLastCharacter(accounts.alpha.key.key), TEST_API_KEY, 'placeholder']) {
      for (const path of ['/v1/files', '/v1/batches', `/v1/batches/${accounts.alpha.batchId}`]) {
        const response = await as(key, path);
        expect(response.status, `${path} with ${key === undefined ? 'no key' : 'a wrong key'}`).toBe(401);
        expect(await response.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_api_key' } });
      }
    }
    // The operator's routes still take the operator key only.
    expect((await as(accounts.alpha.key.key, '/mgmt/v1/accounts')).status).toBe(401);
  });

  it("answers every /v1 endpoint about the other account's objects exactly as about ids never issued", async () => {
    const batchOn = (inputFileId: string, jobId: string) => ({ input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: jobId });
    const cases: Array<{ method: string; path: (id: string) => string; body?: (id: string, me: Objects) => unknown; ids: (o: Objects) => string[]; unknown: string }> = [
      { method: 'GET', path: (id) => `/v1/files/${id}`, ids: fileIds, unknown: 'file-000000000000000000000000' },
      { method: 'GET', path: (id) => `/v1/files/${id}/content`, ids: fileIds, unknown: 'file-000000000000000000000000' },
      { method: 'GET', path: (id) => `/v1/files/${id}/events`, ids: fileIds, unknown: 'file-000000000000000000000000' },
      { method: 'DELETE', path: (id) => `/v1/files/${id}`, ids: fileIds, unknown: 'file-000000000000000000000000' },
      { method: 'GET', path: (id) => `/v1/batches/${id}`, ids: (o) => [o.batchId], unknown: 'batch_000000000000000000000000' },
      { method: 'GET', path: (id) => `/v1/batches/${id}/events`, ids: (o) => [o.batchId], unknown: 'batch_000000000000000000000000' },
      { method: 'GET', path: (id) => `/v1/batches/${id}/events?stream=true`, ids: (o) => [o.batchId], unknown: 'batch_000000000000000000000000' },
      { method: 'POST', path: (id) => `/v1/batches/${id}/cancel`, ids: (o) => [o.batchId], unknown: 'batch_000000000000000000000000' },
      // As cursors of the lists, and as the input of a new batch.
      { method: 'GET', path: (id) => `/v1/files?after=${id}`, ids: fileIds, unknown: 'file-000000000000000000000000' },
      { method: 'GET', path: (id) => `/v1/batches?after=${id}`, ids: (o) => [o.batchId], unknown: 'batch_000000000000000000000000' },
      {
        method: 'POST',
        path: () => '/v1/batches',
        body: (id, me) => batchOn(id, jobOf(me.key.account_id).job_id),
        ids: (o) => [o.inputFileId],
        unknown: 'file-000000000000000000000000',
      },
      { method: 'DELETE', path: (id) => `/v1/webhooks/${id}`, ids: (o) => [o.webhookId], unknown: 'wh_000000000000000000000000' },
      // Another account's job, or a job of no account, as a job never reserved.
      { method: 'POST', path: () => '/v1/batches', body: (id, me) => batchOn(me.inputFileId, id), ids: (o) => [jobOf(o.key.account_id).job_id, 'nobodys'], unknown: 'never-reserved-job' },
    ];
    let asked = 0;
    for (const [me, them] of [
      [accounts.alpha, accounts.beta],
      [accounts.beta, accounts.alpha],
    ] as const) {
      for (const testCase of cases) {
        const ask = async (id: string) => {
          const response = await as(me.key.key, testCase.path(id), { method: testCase.method, ...(testCase.body ? { body: JSON.stringify(testCase.body(id, me)) } : {}) });
          return { status: response.status, body: (await response.text()).replaceAll(id, '<id>') };
        };
        const never = await ask(testCase.unknown);
        expect(never.status, `${testCase.method} ${testCase.path(testCase.unknown)}`).toBeGreaterThanOrEqual(400);
        for (const id of testCase.ids(them)) {
          expect(await ask(id), `${testCase.method} ${testCase.path(id)} with another account's key`).toEqual(never);
          asked++;
        }
      }
    }
    expect(asked).toBe(2 * (5 * 4 + 5 + 1 + 1 + 2));
    // Nothing was touched: the owners still see all of it.
    for (const objects of Object.values(accounts)) {
      for (const id of fileIds(objects)) expect((await objects.client.files.retrieve(id)).id).toBe(id);
      expect((await objects.client.batches.retrieve(objects.batchId)).status).toBe('completed');
      expect(((await (await as(objects.key.key, '/v1/webhooks')).json()) as { data: Array<{ id: string }> }).data.map((webhook) => webhook.id)).toEqual([objects.webhookId]);
    }
  });

  it("lists and shows only the caller's own objects, with their content and history", async () => {
    for (const [name, objects] of Object.entries(accounts)) {
      const other = name === 'alpha' ? accounts.beta : accounts.alpha;
      const files = (await objects.client.files.list()).data.map((file) => file.id).sort();
      expect(files).toEqual(fileIds(objects).sort());
      const batches = (await objects.client.batches.list()).data.map((batch) => batch.id);
      expect(batches).toEqual([objects.batchId]);
      const output = await fileLines(objects.client, objects.outputFileId);
      expect(output.map((line) => line.custom_id)).toEqual([`${name}-ok`]);
      const errors = await fileLines(objects.client, objects.errorFileId);
      expect(errors.map((line) => line.custom_id)).toEqual([`${name}-refused`]);
      // Not one of the other account's ids anywhere in what this account is shown.
      const shown = JSON.stringify([files, batches, output, errors, await (await as(objects.key.key, `/v1/batches/${objects.batchId}/events?limit=100`)).json()]);
      const hooks = await (await as(objects.key.key, '/v1/webhooks')).text();
      for (const id of [...fileIds(other), other.batchId, other.webhookId, other.key.key_id, other.key.account_id]) {
        expect(shown).not.toContain(id);
        expect(hooks).not.toContain(id);
      }
    }
  });

  it("names only the caller's own batches and files in the change stream", async () => {
    expect((await as(undefined, '/v1/changes')).status).toBe(401);
    const controller = new AbortController();
    const stream = await as(accounts.alpha.key.key, '/v1/changes', { signal: controller.signal });
    expect(stream.status).toBe(200);
    const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
    let received = '';
    const until = async (text: string) => {
      while (!received.includes(text)) received += (await reader.read()).value ?? '';
    };
    await until('event: ready');
    // Beta's upload first, then alpha's: by the time alpha's is named, beta's would have been.
    const betas = await accounts.beta.client.files.create({ file: await toFile(Buffer.from('beta'), 'beta.txt'), purpose: 'user_data' });
    const alphas = await accounts.alpha.client.files.create({ file: await toFile(Buffer.from('alpha'), 'alpha.txt'), purpose: 'user_data' });
    await until(`file:${alphas.id}`);
    controller.abort();
    expect(received).not.toContain(betas.id);
  });

  it("keeps each account's blobs under its own prefix of the blob store", () => {
    for (const [name, objects] of Object.entries(accounts)) {
      for (const id of fileIds(objects)) expect(existsSync(join(service.dataDir, 'blobs', 'accounts', name, 'files', id)), `${name}: ${id}`).toBe(true);
    }
    // Nothing outside the accounts' prefixes, and no chunk part left behind: each batch (two
    // chunks of one line) wrote its parts under its account's prefix and removed them from there.
    const stored = readdirSync(join(service.dataDir, 'blobs'), { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => relative(join(service.dataDir, 'blobs'), join(entry.parentPath, entry.name)));
    expect(stored.filter((path) => !path.startsWith('accounts/'))).toEqual([]);
    expect(stored.filter((path) => path.includes('/batches/'))).toEqual([]);
  });

  it('records which account and key did what in the audit trail', async () => {
    const { key, batchId, inputFileId } = accounts.alpha;
    const events = (await (await as(key.key, `/v1/batches/${batchId}/events?limit=100`)).json()) as { data: Array<{ type: string; account_id?: string; key_id?: string | null; data: Record<string, unknown> }> };
    const created = events.data.find((event) => event.type === 'BatchCreated')!;
    expect(created).toMatchObject({ account_id: 'alpha', key_id: key.key_id, data: { account_id: 'alpha' } });
    const uploaded = (await (await as(key.key, `/v1/files/${inputFileId}/events`)).json()) as { data: Array<{ type: string; account_id?: string; key_id?: string | null }> };
    expect(uploaded.data[0]).toMatchObject({ type: 'FileUploaded', account_id: 'alpha', key_id: key.key_id });
  });

  it('opens accounts and keys for the operator, lists key ids but never keys, and refuses a revoked key at once', async () => {
    expect((await mgmt('/accounts', { method: 'POST', body: JSON.stringify({ account_id: 'alpha' }) })).status).toBe(409);
    expect((await mgmt('/accounts', { method: 'POST', body: JSON.stringify({ account_id: 'no spaces' }) })).status).toBe(400);
    expect((await mgmt('/accounts/nobody/keys', { method: 'POST' })).status).toBe(404);
    const gamma = await open('gamma');
    const second = (await (await mgmt('/accounts/gamma/keys', { method: 'POST' })).json()) as Issued;
    issued.push(second.key);
    expect(second).toMatchObject({ account_id: 'gamma', key_id: expect.stringMatching(/^key_/), key: expect.stringMatching(/^sk-spool-/) });
    const listing = await (await mgmt('/accounts')).text();
    expect(JSON.parse(listing).data.find((account: { account_id: string }) => account.account_id === 'gamma').keys.map((k: { key_id: string }) => k.key_id)).toEqual([gamma.key_id, second.key_id].sort());
    for (const issued of [gamma, second, accounts.alpha.key]) expect(listing).not.toContain(issued.key);

    expect((await as(gamma.key, '/v1/files')).status).toBe(200);
    const revokedAt = Date.now();
    expect((await mgmt(`/accounts/gamma/keys/${gamma.key_id}`, { method: 'DELETE' })).status).toBe(200);
    // Refused from the next request on (well within a second), while the account's other key still works.
    const refused = await as(gamma.key, '/v1/files');
    expect(refused.status).toBe(401);
    expect(Date.now() - revokedAt).toBeLessThan(1000);
    expect((await as(second.key, '/v1/files')).status).toBe(200);
    expect((await mgmt(`/accounts/gamma/keys/${gamma.key_id}`, { method: 'DELETE' })).status).toBe(200);
    expect((await mgmt('/accounts/gamma/keys/key_000000000000000000000000', { method: 'DELETE' })).status).toBe(404);
  });

  it("refuses work over an account's limits clearly, and leaves the other accounts' batches running", async () => {
    const delta = await open('delta');
    expect((await reserveJob(service.url, jobOf('delta'))).status).toBe(201);
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: delta.key, maxRetries: 0 });
    const setLimits = async (limits: Record<string, number | null>) => {
      const response = await mgmt('/accounts/delta/limits', { method: 'PUT', body: JSON.stringify(limits) });
      expect(response.status).toBe(200);
      return (await response.json()) as { limits: Record<string, number | null>; usage: Record<string, number> };
    };
    expect((await mgmt('/accounts/delta/limits', { method: 'PUT', body: JSON.stringify({ queued_lines: -1, queued_tokens: null, stored_bytes: null }) })).status).toBe(400);
    expect((await mgmt('/accounts/nobody/limits', { method: 'PUT', body: JSON.stringify({ queued_lines: 1, queued_tokens: null, stored_bytes: null }) })).status).toBe(404);

    // Storage: an upload past the limit is refused and nothing of it is kept.
    await setLimits({ queued_lines: null, queued_tokens: null, stored_bytes: 600 });
    const lines = Array.from({ length: 4 }, (_, index) => chatLine(`delta-${index}`, 'fine'));
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'delta.jsonl'), purpose: 'batch' });
    await expect(client.files.create({ file: await toFile(Buffer.from('x'.repeat(600)), 'big.txt'), purpose: 'user_data' })).rejects.toMatchObject({
      status: 400,
      code: 'storage_limit_exceeded',
      param: 'file',
      message: expect.stringContaining('storage limit is 600 bytes'),
    });
    expect((await client.files.list()).data.map((file) => file.id)).toEqual([input.id]);
    expect(readdirSync(join(service.dataDir, 'blobs', 'accounts', 'delta', 'files'))).toEqual([input.id]);

    // Queued work: a batch over the lines or the tokens its account may queue fails validation, naming the limit.
    const beta = accounts.beta;
    const betaLines = Array.from({ length: 6 }, (_, index) => chatLine(`beta-more-${index}`, 'fine'));
    const betaInput = await beta.client.files.create({ file: await toFile(Buffer.from(betaLines.join('\n')), 'beta-more.jsonl'), purpose: 'batch' });
    const betaBatch = await createBatch(beta.client, { input_file_id: betaInput.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: jobOf('beta').job_id });
    for (const [limits, code] of [
      [{ queued_lines: 3, queued_tokens: null, stored_bytes: null }, 'line_limit_exceeded'],
      [{ queued_lines: null, queued_tokens: 40, stored_bytes: null }, 'token_limit_exceeded'],
    ] as const) {
      await setLimits(limits);
      const refused = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: jobOf('delta').job_id });
      const failed = await waitForStatus(client, refused.id, ['failed', 'completed']);
      expect(failed.status).toBe('failed');
      expect(failed.errors!.data![0]).toMatchObject({ code, line: null });
    }
    // Within its limits it runs; its usage is the account's to see, and the operator's.
    const usage = await setLimits({ queued_lines: 4, queued_tokens: 1000, stored_bytes: 100_000 });
    expect(usage.usage).toEqual({ queued_lines: 0, queued_tokens: 0, stored_bytes: Buffer.byteLength(lines.join('\n')) });
    const ran = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: jobOf('delta').job_id });
    expect((await waitForStatus(client, ran.id, ['failed', 'completed'])).status).toBe('completed');
    const own = (await (await as(delta.key, '/v1/account')).json()) as { account_id: string; limits: Record<string, number>; usage: Record<string, number> };
    expect(own).toMatchObject({ account_id: 'delta', limits: { queued_lines: 4, queued_tokens: 1000, stored_bytes: 100_000 }, usage: { queued_lines: 0 } });
    expect(own.usage.stored_bytes).toBeGreaterThan(Buffer.byteLength(lines.join('\n')));
    // The other account's batch, created before the refusals, ran to its end untouched.
    expect((await waitForStatus(beta.client, betaBatch.id, ['failed', 'completed'])).status).toBe('completed');
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    expect(metrics).toMatch(/spool_account_stored_bytes\{account="delta"\} \d+/);
    expect(metrics).not.toContain(input.id);
  });

  it('never logs a key, at any level (the upload parser logs its headers at trace), though every request and command above was logged', () => {
    expect(logs.length).toBeGreaterThan(100);
    expect(issued.length).toBeGreaterThanOrEqual(5);
    const all = logs.join('');
    for (const key of [...issued, TEST_API_KEY]) expect(logs.filter((line) => line.includes(key)).map((line) => line.slice(0, 600))).toEqual([]);
    expect(all).toContain('"authorization":"[redacted]"');
    // Nor the secret part of one, however cut.
    for (const key of issued) expect(all).not.toContain(key.split('.')[1]!);
  });
});

const wrongLastCharacter = (key: string) => key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
const fileIds = (objects: Objects) => [objects.inputFileId, objects.otherFileId, objects.outputFileId, objects.errorFileId];

describe('the API open beyond loopback without accounts', () => {
  it('is named (ACCOUNTS) where it listens on an address other than loopback with accounts off, and only there', () => {
    const api = new Set(['api'] as const);
    expect(openApiExposure({ accounts: 'off', host: '0.0.0.0' }, api)).toMatch(/ACCOUNTS is off and HOST 0\.0\.0\.0/);
    expect(openApiExposure({ accounts: 'off', host: '10.1.2.3' }, api)).toMatch(/ACCOUNTS=required/);
    expect(openApiExposure({ accounts: 'off', host: '::' }, api)).toBeDefined();
    for (const host of ['127.0.0.1', '127.8.9.1', '::1', 'localhost', '[::1]']) expect(openApiExposure({ accounts: 'off', host }, api), host).toBeUndefined();
    expect(openApiExposure({ accounts: 'required', host: '0.0.0.0' }, api)).toBeUndefined();
    expect(openApiExposure({ accounts: 'off', host: '0.0.0.0' }, new Set(['relay'] as const))).toBeUndefined();
  });

  it('says so in /ready and leaves /v1 open', async () => {
    const service = await startTestService({ env: { HOST: '0.0.0.0' } });
    try {
      const url = service.url.replace('0.0.0.0', '127.0.0.1');
      const ready = (await (await fetch(`${url}/ready`)).json()) as { status: string; warnings?: string[] };
      expect(ready.status).toBe('ready');
      expect(ready.warnings).toEqual([expect.stringMatching(/^ACCOUNTS is off and HOST 0\.0\.0\.0/)]);
      expect((await fetch(`${url}/v1/files`)).status).toBe(200);
    } finally {
      await service.close();
    }
  });
});
