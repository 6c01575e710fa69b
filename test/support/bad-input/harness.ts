// The harness of the bad-input suite (test/bad-input.test.ts): ways of sending malformed requests
// to the service under test, and what every refusal must look like.
import { expect, it } from 'vitest';
import { type HttpAnswer, httpExchange, socketExchange } from '../raw-socket.js';
import { TEST_API_KEY, type WholeService } from '../service.js';

export const KIB = 1024;
export const MIB = 1024 * KIB;
export const LIMITS = { maxFileBytes: 8 * MIB, maxBatchFileBytes: 6 * MIB };
export const AUTH = { authorization: `Bearer ${TEST_API_KEY}` };
export const JSON_TYPE = { 'content-type': 'application/json' };

export interface Expectation {
  /** One status, or the acceptable ones. */
  readonly status: number | readonly number[];
  /** envelope: {error:{message,type,param,code}}; validation: 422 {detail:[…]}; bodiless: a HEAD answer. */
  readonly shape: 'envelope' | 'validation' | 'bodiless';
  readonly param?: string;
  readonly code?: string;
  readonly message?: RegExp;
  /** The first `loc` of a validation answer. */
  readonly loc?: readonly string[];
}

export interface Case {
  readonly name: string;
  readonly send: () => Promise<HttpAnswer>;
  readonly expect: Expectation;
}

/** The service under test and the files the cases name, set once it has started. */
export const target = { service: undefined as unknown as WholeService, inputFileId: '', userDataFileId: '' };

// --- ways of sending ----------------------------------------------------------------------------

export const call = (method: string, path: string, options: { headers?: Record<string, string>; body?: Buffer | string } = {}) => () =>
  httpExchange(target.service.url, { method, path, ...options });

/** A JSON body: an object is serialized, a string or Buffer goes as is. */
export const sendJson = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  call('POST', path, {
    headers: { ...JSON_TYPE, ...headers },
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });

export const mgmtJson = (path: string, body: unknown) => sendJson(path, body, AUTH);
export const raw = (bytes: string | Buffer, options: { endAfterWrite?: boolean } = {}) => () => socketExchange(target.service.url, bytes, options);

export const BOUNDARY = 'bad-input-boundary-4f1c';
export type Part = readonly [name: string, value: string | Buffer, filename?: string, contentType?: string];

/** A multipart/form-data body built byte by byte, so every malformation is possible. */
export function formBody(parts: readonly Part[], options: { boundary?: string; close?: boolean } = {}): Buffer {
  const boundary = options.boundary ?? BOUNDARY;
  const chunks: Buffer[] = [];
  for (const [name, value, filename, contentType] of parts) {
    const disposition = `form-data; name="${name}"${filename !== undefined ? `; filename="${filename}"` : ''}`;
    const type = contentType ?? (filename !== undefined ? 'application/octet-stream' : undefined);
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${type ? `Content-Type: ${type}\r\n` : ''}\r\n`));
    chunks.push(Buffer.isBuffer(value) ? value : Buffer.from(value));
    chunks.push(Buffer.from('\r\n'));
  }
  if (options.close ?? true) chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

export const LINE = '{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"messages":[]}}\n';
export const FILE: Part = ['file', LINE, 'input.jsonl'];
export const upload = (parts: readonly Part[], headers: Record<string, string> = {}) =>
  call('POST', '/v1/files', { headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, ...headers }, body: formBody(parts) });

export const createBatch = (overrides: Record<string, unknown>, drop: readonly string[] = []) => () => {
  const body: Record<string, unknown> = {
    input_file_id: target.inputFileId,
    endpoint: '/v1/chat/completions',
    completion_window: 'unlimited',
    job_id: 'job-demo',
    ...overrides,
  };
  for (const field of drop) delete body[field];
  return httpExchange(target.service.url, { method: 'POST', path: '/v1/batches', headers: JSON_TYPE, body: JSON.stringify(body) });
};

export const JOB = { job_id: 'bad-input-job', model: 'spool-tiny', use_case: 'tests', sla: '24h', price_1m_tokens: 1 };
export const reserve = (overrides: Record<string, unknown>, drop: readonly string[] = []) => {
  const body: Record<string, unknown> = { ...JOB, ...overrides };
  for (const field of drop) delete body[field];
  return mgmtJson('/mgmt/v1/jobs', body);
};

// --- expectations -------------------------------------------------------------------------------

export const envelope = (status: number | readonly number[], param?: string, code?: string, message?: RegExp): Expectation => ({
  status,
  shape: 'envelope',
  ...(param !== undefined ? { param } : {}),
  ...(code !== undefined ? { code } : {}),
  ...(message !== undefined ? { message } : {}),
});
export const invalid = (param: string, message?: RegExp) => envelope(400, param, 'invalid_value', message);
export const missing = (param: string) => envelope(400, param, 'missing_required_parameter');
export const validation = (...loc: string[]): Expectation => ({ status: 422, shape: 'validation', loc });
export const notFound = (param?: string) => envelope(404, param, 'not_found');
export const noRoute = envelope([404, 405]);

export function check(answer: HttpAnswer, expected: Expectation): void {
  const statuses = typeof expected.status === 'number' ? [expected.status] : expected.status;
  const context = `${answer.status} ${answer.body.slice(0, 400)}`;
  expect(answer.status, context).toBeGreaterThanOrEqual(400);
  expect(answer.status, context).toBeLessThan(500);
  expect(statuses, context).toContain(answer.status);
  if (expected.shape === 'bodiless') {
    expect(answer.body).toBe('');
    return;
  }
  expect(String(answer.headers['content-type']), context).toMatch(/^application\/json/);
  const body = JSON.parse(answer.body) as Record<string, unknown>;
  if (expected.shape === 'validation') {
    expect(Object.keys(body)).toEqual(['detail']);
    const detail = body.detail as Array<Record<string, unknown>>;
    expect(detail.length).toBeGreaterThan(0);
    for (const entry of detail) {
      expect(Object.keys(entry).sort()).toEqual(['loc', 'msg', 'type']);
      expect(Array.isArray(entry.loc) && entry.loc.every((part) => typeof part === 'string')).toBe(true);
      expect(typeof entry.msg).toBe('string');
      expect(typeof entry.type).toBe('string');
    }
    if (expected.loc) expect(detail[0]!.loc, context).toEqual(expected.loc);
    return;
  }
  expect(Object.keys(body), context).toEqual(['error']);
  const error = body.error as Record<string, unknown>;
  expect(Object.keys(error).sort()).toEqual(['code', 'message', 'param', 'type']);
  for (const field of ['message', 'type', 'param', 'code']) expect(typeof error[field], `${field} in ${context}`).toBe('string');
  expect(error.type).toBe('invalid_request_error');
  if (expected.param !== undefined) expect(error.param, context).toBe(expected.param);
  if (expected.code !== undefined) expect(error.code, context).toBe(expected.code);
  if (expected.message) expect(error.message, context).toMatch(expected.message);
}

export async function expectReady(): Promise<void> {
  const ready = await httpExchange(target.service.url, { method: 'GET', path: '/ready' });
  expect(ready.status).toBe(200);
}

export function runCases(cases: readonly Case[]): void {
  const names = new Set<string>();
  for (const testCase of cases) {
    if (names.has(testCase.name)) throw new Error(`two cases named ${testCase.name}`);
    names.add(testCase.name);
  }
  it.each(cases.map((testCase) => [testCase.name, testCase] as const))('%s', async (_name, testCase) => {
    check(await testCase.send(), testCase.expect);
    await expectReady();
  });
}

// --- the cases ----------------------------------------------------------------------------------

export const long = (length: number, char = 'a') => char.repeat(length);
