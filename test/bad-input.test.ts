import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { replay } from '../src/process/replay-command.js';
import { listKeys } from './support/blob-store-contract.js';
import { createBatchCases, compatCases, jsonBodyCases, mgmtCases } from './support/bad-input/body-cases.js';
import { JSON_TYPE, LIMITS, LINE, createBatch, expectReady, reserve, runCases, target } from './support/bad-input/harness.js';
import { idAndQueryCases, methodCases, protocolCases } from './support/bad-input/request-cases.js';
import { authCases, contentCases, multipartCases } from './support/bad-input/upload-cases.js';
import { httpExchange } from './support/raw-socket.js';
import { TEST_API_KEY, type WholeService, startTestService, uploadFile } from './support/service.js';

/**
 * Bad input on every endpoint: each case must get a 4xx whose body is the error envelope (or,
 * for malformed path and query parameters, the 422 validation shape), never a 5xx, never a
 * hang, and leave the service ready. At the end nothing is half-written and a replay of the log
 * gives the same read models.
 * The cases, by kind, and the harness that sends them are in test/support/bad-input/.
 */

let service: WholeService;
let inputFileId = '';

describe('bad input, endpoint by endpoint', () => {
  beforeAll(async () => {
    target.service = service = await startTestService({ limits: LIMITS });
    const input = await uploadFile(service.url, { purpose: 'batch', filename: 'good.jsonl', content: LINE });
    expect(input.status).toBe(200);
    target.inputFileId = inputFileId = ((await input.json()) as { id: string }).id;
    const other = await uploadFile(service.url, { purpose: 'user_data', filename: 'notes.txt', content: 'notes' });
    target.userDataFileId = ((await other.json()) as { id: string }).id;
  });
  let closed = false;
  afterAll(async () => {
    if (!closed) await service?.close();
  });

  it('has at least 100 cases', () => {
    const total =
      createBatchCases.length + jsonBodyCases.length + mgmtCases.length + compatCases.length + idAndQueryCases.length + methodCases.length + protocolCases.length + multipartCases.length + authCases.length + contentCases.length;
    expect(total).toBeGreaterThanOrEqual(100);
  });

  it('still takes well-formed input: query integers as text, unknown body fields, null metadata', async () => {
    for (const path of ['/v1/files?limit=10&order=asc', '/v1/files?limit=1&purpose=batch', '/v1/batches?limit=5', `/v1/files/${inputFileId}/events?limit=3`]) {
      const answer = await httpExchange(service.url, { method: 'GET', path });
      expect(answer.status, `${path}: ${answer.body}`).toBe(200);
    }
    const limited = JSON.parse((await httpExchange(service.url, { method: 'GET', path: '/v1/files?limit=1' })).body) as { data: unknown[]; has_more: boolean };
    expect(limited.data).toHaveLength(1);
    expect(limited.has_more).toBe(true);
    const created = await createBatch({ metadata: null, surprise: { anything: 1 }, output_expires_after: { anchor: 'created_at', seconds: 3600 } })();
    expect(created.status, created.body).toBe(200);
    const batch = JSON.parse(created.body) as Record<string, unknown>;
    expect(batch.metadata).toEqual({});
    expect(batch).not.toHaveProperty('surprise');
    const job = await reserve({ job_id: 'bad-input-accepted', price_1m_tokens: 0 })();
    expect(job.status, job.body).toBe(201);
  });

  describe('create-batch bodies', () => runCases(createBatchCases));
  describe('JSON bodies: syntax, types and encodings', () => runCases(jsonBodyCases));
  describe('/mgmt bodies', () => runCases(mgmtCases));
  describe('/compat bodies', () => runCases(compatCases));
  describe('ids and queries', () => runCases(idAndQueryCases));
  describe('methods', () => runCases(methodCases));
  describe('protocol errors', () => runCases(protocolCases));
  describe('multipart uploads', () => runCases(multipartCases));
  describe('authentication and path variants', () => runCases(authCases));

  describe('JSONL content: the batch is created, then fails validation naming the line', () => {
    it.each(contentCases.map((testCase) => [testCase.name, testCase] as const))('%s', async (_name, testCase) => {
      const uploaded = await uploadFile(service.url, { purpose: 'batch', filename: 'input.jsonl', content: testCase.content });
      expect(uploaded.status).toBe(200);
      const fileId = ((await uploaded.json()) as { id: string }).id;
      const created = await fetch(`${service.url}/v1/batches`, {
        method: 'POST',
        headers: JSON_TYPE,
        body: JSON.stringify({ input_file_id: fileId, endpoint: testCase.endpoint ?? '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-demo' }),
      });
      expect(created.status).toBe(200);
      const batchId = ((await created.json()) as { id: string }).id;
      const deadline = Date.now() + 30_000;
      let batch: { status: string; errors: { data: Array<{ code: string; line: number | null; param: string | null }> } };
      for (;;) {
        batch = (await (await fetch(`${service.url}/v1/batches/${batchId}`)).json()) as typeof batch;
        if (batch.status !== 'validating') break;
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(batch.status).toBe('failed');
      expect(batch.errors.data[0]).toMatchObject(testCase.error);
      await expectReady();
    });
  });

  it('leaves nothing half-written, every listed file whole, and read models that a replay reproduces', async () => {
    const partials: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        if (entry.isDirectory()) walk(join(dir, entry.name));
        else partials.push(entry.name);
      }
    };
    walk(join(service.dataDir, 'blobs'));
    expect(partials.filter((name) => name.endsWith('.partial'))).toEqual([]);

    const listed = (await (await fetch(`${service.url}/v1/files`)).json()) as { data: Array<{ id: string; bytes: number }>; has_more: boolean };
    expect(listed.has_more).toBe(false);
    for (const file of listed.data) {
      const content = await fetch(`${service.url}/v1/files/${file.id}/content`);
      expect(content.status).toBe(200);
      expect((await content.arrayBuffer()).byteLength, file.id).toBe(file.bytes);
    }

    // Every stored blob belongs to a recorded upload, and every live file's blob is there.
    const uploads = (await service.eventStore.readAll({ maxCount: 1_000_000 })).filter((event) => event.type === 'FileUploaded');
    const recorded = new Set(uploads.map((event) => event.data.blob_key as string));
    const blobs = await listKeys(service.blobStore, '');
    for (const key of blobs) expect(recorded.has(key), key).toBe(true);
    const liveKeys = uploads.filter((event) => listed.data.some((file) => file.id === event.data.file_id)).map((event) => event.data.blob_key as string);
    for (const key of liveKeys) expect(blobs).toContain(key);

    const dataDir = service.dataDir;
    await service.close();
    closed = true;
    const report = await replay(loadConfig({ DATA_DIR: dataDir, API_KEY: TEST_API_KEY }));
    expect(report.differences).toEqual([]);
    expect(report.identical).toBe(true);
    expect(report.events).toBeGreaterThan(0);
  });
});

