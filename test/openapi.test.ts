import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../src/platform/package-root.js';
import { FakeEngine } from './support/fake-engine.js';
import { chatLine, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir } from './support/service.js';

type Operation = {
  operationId: string;
  requestBody?: { content: Record<string, { schema: Record<string, unknown> }> };
  responses: Record<string, { content?: Record<string, { schema: Record<string, unknown> }> }>;
};
type Document = { servers: unknown[]; paths: Record<string, Record<string, Operation>> };

const JOB = { job_id: 'described', model: 'tiny-chat', use_case: 'openapi', sla: '24h', price_1m_tokens: 1 };
const auth = { authorization: `Bearer ${TEST_API_KEY}` };

/**
 * /openapi.json against the service's real answers: every answer below must be listed under its
 * operation with its status and media type, and its body must validate against the schema there.
 */
describe('the service description', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let doc: Document;
  const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
  const ajv = addFormats(new Ajv({ strict: false, allErrors: true }));
  const checked = new Set<string>();

  const operationFor = (method: string, url: string): [string, Operation] => {
    const pathname = new URL(url).pathname;
    for (const [template, operations] of Object.entries(doc.paths)) {
      const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
      if (pattern.test(pathname) && operations[method.toLowerCase()]) return [template, operations[method.toLowerCase()]!];
    }
    throw new Error(`no operation for ${method} ${pathname} in /openapi.json`);
  };

  /** Sends the request and checks the answer against the description; returns the answer's body. */
  const described = async (method: string, path: string, init: RequestInit = {}): Promise<{ status: number; body: unknown }> => {
    const url = `${service.url}${path}`;
    const answer = await fetch(url, { ...init, method });
    const [template, operation] = operationFor(method, url);
    const response = operation.responses[String(answer.status)] ?? operation.responses.default;
    expect(response, `${method} ${template} answered ${answer.status}, which the description does not list`).toBeDefined();
    const mediaType = (answer.headers.get('content-type') ?? '').split(';')[0]!.trim();
    const content = response!.content?.[mediaType];
    expect(content, `${method} ${template} ${answer.status} answered ${mediaType}, not among ${Object.keys(response!.content ?? {})}`).toBeDefined();
    const text = await answer.text();
    const body: unknown = mediaType.endsWith('json') && mediaType !== 'application/jsonl' ? JSON.parse(text) : text;
    const validate = ajv.compile(content!.schema);
    expect(validate(body), `${method} ${template} ${answer.status}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    checked.add(`${method} ${template} ${answer.status}`);
    return { status: answer.status, body };
  };
  const json = (value: unknown): RequestInit => ({ headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify(value) });

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({ env: { ENGINE_BASE_URL: engine.url, BATCH_CHUNK_LINES: '2' } });
    doc = (await (await fetch(`${service.url}/openapi.json`)).json()) as Document;
  });
  afterAll(async () => {
    await service.close();
    await engine.stop();
  });

  it('lists servers and a unique operationId for every operation', () => {
    expect(doc.servers.length).toBeGreaterThan(0);
    const ids = Object.values(doc.paths).flatMap((operations) => Object.values(operations).map((operation) => operation.operationId));
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('describes every answer the routes really give', async () => {
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    await described('POST', '/mgmt/v1/jobs', json(JOB));
    await described('GET', '/mgmt/v1/jobs', { headers: auth });
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([[chatLine('a', 'one'), chatLine('b', 'two')].join('\n')]), 'described.jsonl');
    const uploaded = (await described('POST', '/v1/files', { body: form })).body as { id: string };
    await described('GET', '/v1/files?limit=1');
    await described('GET', '/v1/files?purpose=fine-tune');
    await described('GET', `/v1/files/${uploaded.id}`);
    await described('GET', `/v1/files/${uploaded.id}/content`);
    const text = await client.files.create({ file: await toFile(Buffer.from('plain'), 'notes.txt'), purpose: 'user_data' });
    await described('GET', `/v1/files/${text.id}/content`);
    const blob = await client.files.create({ file: await toFile(Buffer.from('raw'), 'raw.bin'), purpose: 'user_data' });
    await described('GET', `/v1/files/${blob.id}/content`);
    await described('DELETE', `/v1/files/${blob.id}`);
    await described('GET', `/v1/files/${blob.id}`);
    await described('GET', '/v1/files?after=%3B');

    // Unknown fields are accepted, as the description says.
    const created = (await described('POST', '/v1/batches', json({ input_file_id: uploaded.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id, unknown_field: 1 }))).body as { id: string; status: string };
    expect(created.status).toBe('validating');
    await waitForStatus(client, created.id, ['completed']);
    await described('GET', `/v1/batches/${created.id}`);
    await described('GET', '/v1/batches?limit=1');
    await described('POST', `/v1/batches/${created.id}/cancel`);
    await described('GET', `/v1/batches/${created.id}/events`, { headers: auth });
    const timeline = (await described('GET', `/v1/batches/${created.id}/events?lines=false`)).body as { data: Array<{ type: string }> };
    // The batch's own events alone (its two lines' outcomes left out), in the order recorded.
    expect(timeline.data.map((event) => event.type)).toEqual(['BatchCreated', 'BatchValidated', 'BatchFinalizing', 'BatchCompleted']);
    const streamed = (await described('GET', `/v1/batches/${created.id}/events?stream=true`)).body as string;
    expect(streamed).toMatch(/^id: [0-9a-f-]{36}\nevent: BatchCreated\ndata: \{/);

    await described('GET', '/compat/v1/models', { headers: auth });
    await described('POST', '/compat/v1/chat/completions', json({ model: 'tiny-chat', messages: [{ role: 'user', content: 'hi' }] }));
    await described('POST', '/compat/v1/chat/completions', json({ model: 'tiny-chat', stream: true, messages: [{ role: 'user', content: 'hi' }] }));
    await described('POST', '/compat/v1/embeddings', json({ model: 'tiny-chat', input: 'hi' }));
    const webhook = (await described('POST', '/mgmt/v1/webhooks', json({ url: 'http://127.0.0.1:9/hook', events: ['batch.failed'] }))).body as { id: string };
    await described('POST', '/mgmt/v1/webhooks', json({ url: 'ftp://127.0.0.1/hook' }));
    await described('GET', '/mgmt/v1/webhooks', { headers: auth });
    await described('GET', `/mgmt/v1/webhooks/${webhook.id}/events`, { headers: auth });
    await described('DELETE', `/mgmt/v1/webhooks/${webhook.id}`, { headers: auth });
    await described('DELETE', `/mgmt/v1/webhooks/${webhook.id}`, { headers: auth });
    await described('GET', '/mgmt/v1/weights/status', { headers: auth });
    await described('POST', '/mgmt/v1/weights/reload', json({ weights: { 'no-such-model': 's3://bucket/x' } }));
    await described('GET', '/live');
    await described('GET', '/ready');
    await described('GET', '/openapi.json');
    await described('GET', '/docs');
    await described('GET', '/console');
    await described('GET', '/console/console.js');
    await described('GET', '/console/console.css');
    expect(checked.size).toBeGreaterThanOrEqual(20);
  });

  it('passes Redocly lint with the recommended rules', () => {
    const file = join(tempDir('openapi'), 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const lint = spawnSync(join(packageRoot, 'node_modules', '.bin', 'redocly'), ['lint', '--extends=recommended', '--format=stylish', file], {
      encoding: 'utf8',
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    });
    expect(lint.stdout + lint.stderr).toMatch(/Woohoo! Your API description is valid/);
    expect(lint.stdout + lint.stderr).not.toMatch(/warning/i);
    expect(lint.status).toBe(0);
  }, 60_000);
});
