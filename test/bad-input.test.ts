import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { replay } from '../src/process/replay-command.js';
import { listKeys } from './support/blob-store-contract.js';
import { type HttpAnswer, httpExchange, socketExchange } from './support/raw-socket.js';
import { TEST_API_KEY, type WholeService, startTestService, uploadFile } from './support/service.js';

/**
 * Bad input on every endpoint: each case must get a 4xx whose body is the error envelope (or,
 * for malformed path and query parameters, the 422 validation shape), never a 5xx, never a
 * hang, and leave the service ready. At the end nothing is half-written and a replay of the log
 * gives the same read models.
 */

const KIB = 1024;
const MIB = 1024 * KIB;
const LIMITS = { maxFileBytes: 8 * MIB, maxBatchFileBytes: 6 * MIB };
const AUTH = { authorization: `Bearer ${TEST_API_KEY}` };
const JSON_TYPE = { 'content-type': 'application/json' };

interface Expectation {
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

interface Case {
  readonly name: string;
  readonly send: () => Promise<HttpAnswer>;
  readonly expect: Expectation;
}

let service: WholeService;
let inputFileId = '';
let userDataFileId = '';

// --- ways of sending ----------------------------------------------------------------------------

const call = (method: string, path: string, options: { headers?: Record<string, string>; body?: Buffer | string } = {}) => () =>
  httpExchange(service.url, { method, path, ...options });

/** A JSON body: an object is serialized, a string or Buffer goes as is. */
const sendJson = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  call('POST', path, {
    headers: { ...JSON_TYPE, ...headers },
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });

const mgmtJson = (path: string, body: unknown) => sendJson(path, body, AUTH);
const raw = (bytes: string | Buffer, options: { endAfterWrite?: boolean } = {}) => () => socketExchange(service.url, bytes, options);

const BOUNDARY = 'bad-input-boundary-4f1c';
type Part = readonly [name: string, value: string | Buffer, filename?: string, contentType?: string];

/** A multipart/form-data body built byte by byte, so every malformation is possible. */
function formBody(parts: readonly Part[], options: { boundary?: string; close?: boolean } = {}): Buffer {
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

const LINE = '{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"messages":[]}}\n';
const FILE: Part = ['file', LINE, 'input.jsonl'];
const upload = (parts: readonly Part[], headers: Record<string, string> = {}) =>
  call('POST', '/v1/files', { headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, ...headers }, body: formBody(parts) });

const createBatch = (overrides: Record<string, unknown>, drop: readonly string[] = []) => () => {
  const body: Record<string, unknown> = {
    input_file_id: inputFileId,
    endpoint: '/v1/chat/completions',
    completion_window: 'unlimited',
    job_id: 'job-demo',
    ...overrides,
  };
  for (const field of drop) delete body[field];
  return httpExchange(service.url, { method: 'POST', path: '/v1/batches', headers: JSON_TYPE, body: JSON.stringify(body) });
};

const JOB = { job_id: 'bad-input-job', model: 'spool-tiny', use_case: 'tests', sla: '24h', price_1m_tokens: 1 };
const reserve = (overrides: Record<string, unknown>, drop: readonly string[] = []) => {
  const body: Record<string, unknown> = { ...JOB, ...overrides };
  for (const field of drop) delete body[field];
  return mgmtJson('/mgmt/v1/jobs', body);
};

// --- expectations -------------------------------------------------------------------------------

const envelope = (status: number | readonly number[], param?: string, code?: string, message?: RegExp): Expectation => ({
  status,
  shape: 'envelope',
  ...(param !== undefined ? { param } : {}),
  ...(code !== undefined ? { code } : {}),
  ...(message !== undefined ? { message } : {}),
});
const invalid = (param: string, message?: RegExp) => envelope(400, param, 'invalid_value', message);
const missing = (param: string) => envelope(400, param, 'missing_required_parameter');
const validation = (...loc: string[]): Expectation => ({ status: 422, shape: 'validation', loc });
const notFound = (param?: string) => envelope(404, param, 'not_found');
const noRoute = envelope([404, 405]);

function check(answer: HttpAnswer, expected: Expectation): void {
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

async function expectReady(): Promise<void> {
  const ready = await httpExchange(service.url, { method: 'GET', path: '/ready' });
  expect(ready.status).toBe(200);
}

function runCases(cases: readonly Case[]): void {
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

const long = (length: number, char = 'a') => char.repeat(length);

const createBatchCases: Case[] = [
  ...['input_file_id', 'endpoint', 'completion_window', 'job_id'].map((field) => ({
    name: `create batch without ${field}`,
    send: createBatch({}, [field]),
    expect: missing(field),
  })),
  { name: 'create batch: input_file_id a number', send: createBatch({ input_file_id: 123 }), expect: invalid('input_file_id', /string/) },
  { name: 'create batch: input_file_id empty', send: createBatch({ input_file_id: '' }), expect: invalid('input_file_id') },
  { name: 'create batch: input_file_id of 129 characters', send: createBatch({ input_file_id: long(129) }), expect: invalid('input_file_id') },
  { name: 'create batch: input_file_id unknown', send: createBatch({ input_file_id: 'file-000000000000000000000000' }), expect: envelope([400, 404], 'input_file_id') },
  { name: 'create batch: input file of purpose user_data', send: () => createBatch({ input_file_id: userDataFileId })(), expect: envelope(400, 'input_file_id') },
  { name: 'create batch: unknown endpoint', send: createBatch({ endpoint: '/v1/images/generations' }), expect: invalid('endpoint') },
  { name: 'create batch: endpoint in a one-element array', send: createBatch({ endpoint: ['/v1/chat/completions'] }), expect: invalid('endpoint', /string/) },
  { name: 'create batch: completion_window 24h', send: createBatch({ completion_window: '24h' }), expect: invalid('completion_window') },
  { name: 'create batch: completion_window null', send: createBatch({ completion_window: null }), expect: invalid('completion_window') },
  { name: 'create batch: job_id a number', send: createBatch({ job_id: 42 }), expect: invalid('job_id', /string/) },
  { name: 'create batch: job_id true', send: createBatch({ job_id: true }), expect: invalid('job_id', /string/) },
  { name: 'create batch: job_id of 257 characters', send: createBatch({ job_id: long(257) }), expect: invalid('job_id') },
  { name: 'create batch: job_id not reserved', send: createBatch({ job_id: 'never-reserved' }), expect: envelope([400, 404], 'job_id') },
  { name: 'create batch: metadata value a number', send: createBatch({ metadata: { k: 1 } }), expect: invalid('metadata.k', /string/) },
  { name: 'create batch: metadata value null', send: createBatch({ metadata: { k: null } }), expect: invalid('metadata.k', /string/) },
  { name: 'create batch: metadata value true', send: createBatch({ metadata: { k: true } }), expect: invalid('metadata.k', /string/) },
  { name: 'create batch: metadata value an object', send: createBatch({ metadata: { k: { nested: 'x' } } }), expect: invalid('metadata.k') },
  { name: 'create batch: metadata value an array', send: createBatch({ metadata: { k: ['x'] } }), expect: invalid('metadata.k', /string/) },
  { name: 'create batch: metadata a string', send: createBatch({ metadata: 'team=docs' }), expect: invalid('metadata') },
  { name: 'create batch: metadata an array', send: createBatch({ metadata: [{ k: 'v' }] }), expect: invalid('metadata') },
  { name: 'create batch: metadata a number', send: createBatch({ metadata: 5 }), expect: invalid('metadata') },
  {
    name: 'create batch: metadata with 17 pairs',
    send: createBatch({ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`k${index}`, 'v'])) }),
    expect: invalid('metadata', /16/),
  },
  { name: 'create batch: metadata key of 65 characters', send: createBatch({ metadata: { [long(65, 'k')]: 'v' } }), expect: invalid('metadata', /64/) },
  { name: 'create batch: metadata value of 513 characters', send: createBatch({ metadata: { k: long(513) } }), expect: invalid('metadata.k', /512/) },
  { name: 'create batch: output_expires_after seconds 3599', send: createBatch({ output_expires_after: { anchor: 'created_at', seconds: 3599 } }), expect: invalid('output_expires_after.seconds', /3600/) },
  { name: 'create batch: output_expires_after seconds 2592001', send: createBatch({ output_expires_after: { anchor: 'created_at', seconds: 2592001 } }), expect: invalid('output_expires_after.seconds', /2592000/) },
  { name: 'create batch: output_expires_after seconds a numeric string', send: createBatch({ output_expires_after: { anchor: 'created_at', seconds: '3600' } }), expect: invalid('output_expires_after.seconds', /integer/) },
  { name: 'create batch: output_expires_after seconds in an array', send: createBatch({ output_expires_after: { anchor: 'created_at', seconds: [3600] } }), expect: invalid('output_expires_after.seconds', /integer/) },
  { name: 'create batch: output_expires_after seconds 3600.5', send: createBatch({ output_expires_after: { anchor: 'created_at', seconds: 3600.5 } }), expect: invalid('output_expires_after.seconds', /integer/) },
  { name: 'create batch: output_expires_after anchor now', send: createBatch({ output_expires_after: { anchor: 'now', seconds: 3600 } }), expect: invalid('output_expires_after.anchor') },
  { name: 'create batch: output_expires_after without seconds', send: createBatch({ output_expires_after: { anchor: 'created_at' } }), expect: missing('output_expires_after.seconds') },
  { name: 'create batch: output_expires_after without anchor', send: createBatch({ output_expires_after: { seconds: 3600 } }), expect: missing('output_expires_after.anchor') },
  { name: 'create batch: output_expires_after a string', send: createBatch({ output_expires_after: '3600' }), expect: invalid('output_expires_after') },
  { name: 'create batch: output_expires_after an array', send: createBatch({ output_expires_after: [] }), expect: invalid('output_expires_after') },
  { name: 'create batch: unknown field beside a wrong type', send: createBatch({ surprise: 1, job_id: 7 }), expect: invalid('job_id') },
];

const jsonBodyCases: Case[] = [
  { name: 'JSON body: an array', send: sendJson('/v1/batches', []), expect: invalid('', /object/) },
  { name: 'JSON body: a string', send: sendJson('/v1/batches', '"batch"'), expect: invalid('', /object/) },
  { name: 'JSON body: null', send: sendJson('/v1/batches', 'null'), expect: envelope(400) },
  { name: 'JSON body: empty with a JSON content type', send: sendJson('/v1/batches', ''), expect: envelope(400) },
  { name: 'JSON body: none and no content type', send: call('POST', '/v1/batches'), expect: envelope(400) },
  { name: 'JSON body: not JSON', send: sendJson('/v1/batches', '{"input_file_id":'), expect: envelope(400) },
  { name: 'JSON body: trailing garbage', send: sendJson('/v1/batches', '{}}'), expect: envelope(400) },
  { name: 'JSON body: single quotes', send: sendJson('/v1/batches', "{'job_id':'x'}"), expect: envelope(400) },
  { name: 'JSON body: __proto__ key', send: sendJson('/v1/batches', '{"__proto__":{"polluted":true}}'), expect: envelope(400) },
  { name: 'JSON body: text/plain', send: call('POST', '/v1/batches', { headers: { 'content-type': 'text/plain' }, body: '{}' }), expect: envelope(415, '', 'unsupported_media_type') },
  { name: 'JSON body: form-urlencoded', send: call('POST', '/v1/batches', { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'job_id=x' }), expect: envelope(415, '', 'unsupported_media_type') },
  { name: 'JSON body: multipart to a JSON route', send: call('POST', '/v1/batches', { headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body: formBody([['job_id', 'x']]) }), expect: envelope([400, 415]) },
  { name: 'JSON body: gzip content-encoding', send: sendJson('/v1/batches', gzipSync('{}'), { 'content-encoding': 'gzip' }), expect: envelope(415, '', 'unsupported_content_encoding') },
  { name: 'JSON body: charset latin1', send: sendJson('/v1/batches', '{}', { 'content-type': 'application/json; charset=iso-8859-1' }), expect: envelope(415, '', 'unsupported_media_type') },
  { name: 'JSON body: invalid UTF-8', send: sendJson('/v1/batches', Buffer.concat([Buffer.from('{"job_id":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')])), expect: envelope(400, '', 'invalid_json', /UTF-8/) },
  { name: 'JSON body: overlong UTF-8 encoding', send: sendJson('/v1/batches', Buffer.concat([Buffer.from('{"job_id":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')])), expect: envelope(400, '', 'invalid_json', /UTF-8/) },
  { name: 'JSON body: a raw NUL byte in a string', send: sendJson('/v1/batches', '{"job_id":"a\u0000b"}'), expect: envelope(400) },
  { name: 'JSON body: a NUL byte between tokens', send: sendJson('/v1/batches', '{\u0000}'), expect: envelope(400) },
  { name: 'JSON body: a byte order mark', send: sendJson('/v1/batches', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{}')])), expect: envelope(400, '', 'invalid_json', /byte order mark/) },
  { name: 'JSON body: UTF-16', send: sendJson('/v1/batches', Buffer.from('\ufeff{}', 'utf16le')), expect: envelope(400, '', 'invalid_json') },
  { name: 'JSON body: over 1 MiB', send: sendJson('/v1/batches', JSON.stringify({ metadata: { k: long(MIB + 10) } })), expect: envelope(413) },
];

const mgmtCases: Case[] = [
  ...['job_id', 'model', 'use_case', 'sla', 'price_1m_tokens'].map((field) => ({ name: `reserve job without ${field}`, send: reserve({}, [field]), expect: missing(field) })),
  { name: 'reserve job: price a numeric string', send: reserve({ price_1m_tokens: '0.5' }), expect: invalid('price_1m_tokens', /number/) },
  { name: 'reserve job: price negative', send: reserve({ price_1m_tokens: -1 }), expect: invalid('price_1m_tokens') },
  { name: 'reserve job: price null', send: reserve({ price_1m_tokens: null }), expect: invalid('price_1m_tokens') },
  { name: 'reserve job: sla 24x', send: reserve({ sla: '24x' }), expect: invalid('sla') },
  { name: 'reserve job: sla in an array', send: reserve({ sla: ['24h'] }), expect: invalid('sla', /string/) },
  { name: 'reserve job: model a number', send: reserve({ model: 5 }), expect: invalid('model', /string/) },
  { name: 'reserve job: job_id empty', send: reserve({ job_id: '' }), expect: invalid('job_id') },
  { name: 'reserve job: job_id of 257 characters', send: reserve({ job_id: long(257) }), expect: invalid('job_id') },
  { name: 'reserve job: use_case of 1025 characters', send: reserve({ use_case: long(1025) }), expect: invalid('use_case') },
  { name: 'reserve job: job-demo with another definition', send: reserve({ job_id: 'job-demo', price_1m_tokens: 99 }), expect: envelope(409, 'job_id', 'conflict') },
  { name: 'reserve job: an array body', send: mgmtJson('/mgmt/v1/jobs', [JOB]), expect: invalid('', /object/) },
  { name: 'weights upload: no weights', send: mgmtJson('/mgmt/v1/weights/upload', {}), expect: missing('weights') },
  { name: 'weights upload: empty weights', send: mgmtJson('/mgmt/v1/weights/upload', { weights: {} }), expect: invalid('weights') },
  { name: 'weights upload: weights a string', send: mgmtJson('/mgmt/v1/weights/upload', { weights: 's3://b/p/' }), expect: invalid('weights') },
  { name: 'weights upload: location a number', send: mgmtJson('/mgmt/v1/weights/upload', { weights: { 'spool-tiny': 5 } }), expect: invalid('weights.spool-tiny', /string/) },
  { name: 'weights upload: location null', send: mgmtJson('/mgmt/v1/weights/upload', { weights: { 'spool-tiny': null } }), expect: invalid('weights.spool-tiny', /string/) },
  { name: 'weights upload: location not s3', send: mgmtJson('/mgmt/v1/weights/upload', { weights: { 'spool-tiny': 'http://example.com/ckpt/' } }), expect: invalid('weights.spool-tiny', /s3:/) },
  { name: 'weights upload: s3 without a prefix', send: mgmtJson('/mgmt/v1/weights/upload', { weights: { 'spool-tiny': 's3://bucket' } }), expect: invalid('weights.spool-tiny', /s3:/) },
  { name: 'weights upload: s3 with no bucket', send: mgmtJson('/mgmt/v1/weights/upload', { weights: { 'spool-tiny': 's3:///prefix/' } }), expect: invalid('weights.spool-tiny', /s3:/) },
  { name: 'weights upload: location of 2049 characters', send: mgmtJson('/mgmt/v1/weights/upload', { weights: { 'spool-tiny': `s3://b/${long(2042)}/` } }), expect: invalid('weights.spool-tiny') },
  { name: 'weights upload: unknown model', send: mgmtJson('/mgmt/v1/weights/upload', { weights: { 'no-such-model': 's3://b/p/' } }), expect: envelope(404, 'weights.no-such-model', 'model_not_found') },
  {
    name: 'weights upload: 65 models',
    send: mgmtJson('/mgmt/v1/weights/upload', { weights: Object.fromEntries(Array.from({ length: 65 }, (_, index) => [`m${index}`, 's3://b/p/'])) }),
    expect: invalid('weights', /64/),
  },
  { name: 'weights reload: weights an array', send: mgmtJson('/mgmt/v1/weights/reload', { weights: ['spool-tiny'] }), expect: invalid('weights') },
  { name: 'weights reload: nothing staged', send: mgmtJson('/mgmt/v1/weights/reload', { weights: { 'spool-tiny': '' } }), expect: envelope(400, 'weights.spool-tiny') },
  { name: 'weights events: model of 257 characters', send: call('GET', `/mgmt/v1/weights/${long(257)}/events`, { headers: AUTH }), expect: validation('path', 'model') },
  { name: 'weights events: limit 1001', send: call('GET', '/mgmt/v1/weights/spool-tiny/events?limit=1001', { headers: AUTH }), expect: validation('query', 'limit') },
];

const compatCases: Case[] = [
  { name: 'compat chat: no model', send: mgmtJson('/compat/v1/chat/completions', { messages: [] }), expect: missing('model') },
  { name: 'compat chat: model a number', send: mgmtJson('/compat/v1/chat/completions', { model: 5, messages: [] }), expect: invalid('model', /string/) },
  { name: 'compat chat: model in an array', send: mgmtJson('/compat/v1/chat/completions', { model: ['spool-tiny'], messages: [] }), expect: invalid('model', /string/) },
  { name: 'compat chat: model empty', send: mgmtJson('/compat/v1/chat/completions', { model: '', messages: [] }), expect: invalid('model') },
  { name: 'compat chat: unknown model', send: mgmtJson('/compat/v1/chat/completions', { model: 'nope', messages: [] }), expect: envelope(404, 'model', 'model_not_found') },
  { name: 'compat completions: an array body', send: mgmtJson('/compat/v1/completions', [{ model: 'spool-tiny' }]), expect: invalid('', /object/) },
  { name: 'compat embeddings: model null', send: mgmtJson('/compat/v1/embeddings', { model: null, input: 'x' }), expect: invalid('model') },
  { name: 'compat responses: not JSON', send: mgmtJson('/compat/v1/responses', '{"model":'), expect: envelope(400) },
  { name: 'compat responses: text/plain', send: call('POST', '/compat/v1/responses', { headers: { ...AUTH, 'content-type': 'text/plain' }, body: 'hi' }), expect: envelope(415) },
  { name: 'compat chat: empty body', send: call('POST', '/compat/v1/chat/completions', { headers: AUTH }), expect: envelope(400) },
];

const idAndQueryCases: Case[] = [
  { name: 'file id of 110 valid characters: unknown', send: call('GET', `/v1/files/file-${long(105, 'f')}`), expect: notFound('file_id') },
  { name: 'file id of 128 valid characters: unknown', send: call('GET', `/v1/files/file-${long(123, 'f')}`), expect: notFound('file_id') },
  { name: 'file id of 129 characters', send: call('GET', `/v1/files/${long(129, 'f')}`), expect: validation('path', 'file_id') },
  { name: 'file id of 5000 characters', send: call('GET', `/v1/files/${long(5000, 'f')}`), expect: validation('path') },
  { name: 'file content: id of 120 characters', send: call('GET', `/v1/files/${long(120, 'f')}/content`), expect: notFound('file_id') },
  { name: 'file id with a dot', send: call('GET', '/v1/files/file.1'), expect: validation('path', 'file_id') },
  { name: 'file id with an encoded space', send: call('GET', '/v1/files/file%201'), expect: validation('path', 'file_id') },
  { name: 'file id with an encoded NUL', send: call('GET', '/v1/files/file%00'), expect: validation('path', 'file_id') },
  { name: 'file id with an encoded slash', send: call('GET', '/v1/files/file%2F1'), expect: validation('path', 'file_id') },
  { name: 'file id with non-ASCII letters', send: call('GET', '/v1/files/file-%C3%A9'), expect: validation('path', 'file_id') },
  { name: 'file id: truncated percent-encoding', send: call('GET', '/v1/files/%E0%A4%A'), expect: validation('path') },
  { name: 'file id: percent-encoding that is not hex', send: call('GET', '/v1/files/file-%ZZ'), expect: validation('path') },
  { name: 'file id: percent-encoded invalid UTF-8', send: call('GET', '/v1/files/file-%C3%28'), expect: validation('path') },
  { name: 'delete unknown file', send: call('DELETE', '/v1/files/file-000000000000000000000000'), expect: notFound('file_id') },
  { name: 'content of unknown file', send: call('GET', '/v1/files/file-000000000000000000000000/content'), expect: notFound('file_id') },
  { name: 'events of unknown file', send: call('GET', '/v1/files/file-000000000000000000000000/events'), expect: notFound('file_id') },
  { name: 'batch id of 129 characters', send: call('GET', `/v1/batches/${long(129, 'b')}`), expect: validation('path', 'batch_id') },
  { name: 'batch id of 128 characters: unknown', send: call('GET', `/v1/batches/${long(128, 'b')}`), expect: notFound('batch_id') },
  { name: 'cancel: batch id of 101 characters', send: call('POST', `/v1/batches/${long(101, 'b')}/cancel`), expect: envelope(404, 'batch_id') },
  { name: 'cancel unknown batch', send: call('POST', '/v1/batches/batch_000000000000000000000000/cancel'), expect: envelope(404, 'batch_id') },
  { name: 'batch id with a colon', send: call('GET', '/v1/batches/batch:1'), expect: validation('path', 'batch_id') },
  { name: 'files limit 0', send: call('GET', '/v1/files?limit=0'), expect: validation('query', 'limit') },
  { name: 'files limit 10001', send: call('GET', '/v1/files?limit=10001'), expect: validation('query', 'limit') },
  { name: 'files limit abc', send: call('GET', '/v1/files?limit=abc'), expect: validation('query', 'limit') },
  { name: 'files limit 10abc', send: call('GET', '/v1/files?limit=10abc'), expect: validation('query', 'limit') },
  { name: 'files limit 1.5', send: call('GET', '/v1/files?limit=1.5'), expect: validation('query', 'limit') },
  { name: 'files limit -1', send: call('GET', '/v1/files?limit=-1'), expect: validation('query', 'limit') },
  { name: 'files limit empty', send: call('GET', '/v1/files?limit='), expect: validation('query', 'limit') },
  { name: 'files limit hexadecimal', send: call('GET', '/v1/files?limit=0x10'), expect: validation('query', 'limit') },
  { name: 'files limit with an exponent', send: call('GET', '/v1/files?limit=1e3'), expect: validation('query', 'limit') },
  { name: 'files limit with spaces', send: call('GET', '/v1/files?limit=%2010'), expect: validation('query', 'limit') },
  { name: 'files limit repeated', send: call('GET', '/v1/files?limit=1&limit=2'), expect: validation('query', 'limit') },
  { name: 'files order sideways', send: call('GET', '/v1/files?order=sideways'), expect: validation('query', 'order') },
  { name: 'files order repeated', send: call('GET', '/v1/files?order=asc&order=desc'), expect: validation('query', 'order') },
  { name: 'files purpose unknown', send: call('GET', '/v1/files?purpose=homework'), expect: validation('query', 'purpose') },
  { name: 'files after unknown', send: call('GET', '/v1/files?after=file-000000000000000000000000'), expect: invalid('after') },
  { name: 'files after of 129 characters', send: call('GET', `/v1/files?after=${long(129)}`), expect: validation('query', 'after') },
  { name: 'files after with bad characters', send: call('GET', '/v1/files?after=file%3B1'), expect: validation('query', 'after') },
  { name: 'files after: truncated percent-encoding', send: call('GET', '/v1/files?after=%E0%A4%A'), expect: validation('query', 'after') },
  { name: 'files query: bad percent-encoding in a name', send: call('GET', '/v1/files?li%ZZmit=1'), expect: validation('query') },
  { name: 'batches limit 0', send: call('GET', '/v1/batches?limit=0'), expect: validation('query', 'limit') },
  { name: 'batches limit 101', send: call('GET', '/v1/batches?limit=101'), expect: validation('query', 'limit') },
  { name: 'batches limit abc', send: call('GET', '/v1/batches?limit=abc'), expect: validation('query', 'limit') },
  { name: 'batches after unknown', send: call('GET', '/v1/batches?after=batch_000000000000000000000000'), expect: invalid('after') },
  { name: 'batches after repeated', send: call('GET', '/v1/batches?after=a&after=b'), expect: validation('query', 'after') },
  { name: 'batch events limit 1001', send: call('GET', '/v1/batches/batch_000000000000000000000000/events?limit=1001'), expect: validation('query', 'limit') },
  { name: 'batch events after not a uuid', send: call('GET', '/v1/batches/batch_000000000000000000000000/events?after=nope'), expect: validation('query', 'after') },
];

const methodCases: Case[] = [
  { name: 'PUT /v1/files', send: call('PUT', '/v1/files', { headers: JSON_TYPE, body: '{}' }), expect: noRoute },
  { name: 'PATCH /v1/batches', send: call('PATCH', '/v1/batches', { headers: JSON_TYPE, body: '{}' }), expect: noRoute },
  { name: 'DELETE /v1/batches/{id}', send: call('DELETE', '/v1/batches/batch_000000000000000000000000'), expect: noRoute },
  { name: 'PUT /v1/files/{id}', send: call('PUT', '/v1/files/file-000000000000000000000000'), expect: noRoute },
  { name: 'POST /v1/files/{id}', send: call('POST', '/v1/files/file-000000000000000000000000'), expect: noRoute },
  { name: 'GET /v1/batches/{id}/cancel', send: call('GET', '/v1/batches/batch_000000000000000000000000/cancel'), expect: noRoute },
  { name: 'DELETE /mgmt/v1/jobs', send: call('DELETE', '/mgmt/v1/jobs', { headers: AUTH }), expect: noRoute },
  { name: 'GET /compat/v1/chat/completions', send: call('GET', '/compat/v1/chat/completions', { headers: AUTH }), expect: noRoute },
  { name: 'OPTIONS /v1/files', send: call('OPTIONS', '/v1/files'), expect: noRoute },
  { name: 'OPTIONS *', send: raw('OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'), expect: envelope([400, 404]) },
  { name: 'HEAD on a POST-only route', send: call('HEAD', '/v1/batches/batch_000000000000000000000000/cancel'), expect: { status: [404, 405], shape: 'bodiless' } },
  { name: 'HEAD on an unknown file', send: call('HEAD', '/v1/files/file-000000000000000000000000'), expect: { status: 404, shape: 'bodiless' } },
  { name: 'PROPFIND /v1/files', send: call('PROPFIND', '/v1/files'), expect: noRoute },
  { name: 'an unknown method', send: raw('FROBNICATE /v1/files HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'), expect: envelope([400, 405, 501]) },
  { name: 'an unknown route', send: call('GET', '/v2/files'), expect: notFound() },
];

const protocolCases: Case[] = [
  { name: 'request line of garbage', send: raw('GARBAGE\r\n\r\n'), expect: envelope(400) },
  { name: 'unsupported HTTP version', send: raw('GET /v1/files HTTP/3.0\r\nHost: x\r\n\r\n'), expect: envelope([400, 505]) },
  { name: 'a space in the path', send: raw('GET /v1/files/a b HTTP/1.1\r\nHost: x\r\n\r\n'), expect: envelope(400) },
  { name: 'a header without a colon', send: raw('GET /v1/files HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n'), expect: envelope(400) },
  { name: 'a header name with a space', send: raw('GET /v1/files HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n'), expect: envelope(400) },
  { name: 'a NUL byte in a header', send: raw('GET /v1/files HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n'), expect: envelope(400) },
  { name: 'headers over the size limit', send: raw(`GET /v1/files HTTP/1.1\r\nHost: x\r\nX-Big: ${long(20 * KIB)}\r\n\r\n`), expect: envelope(431) },
  { name: 'Content-Length not a number', send: raw('POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}'), expect: envelope(400) },
  { name: 'Content-Length negative', send: raw('POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: -2\r\n\r\n{}'), expect: envelope(400) },
  { name: 'two different Content-Lengths', send: raw('POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}'), expect: envelope(400) },
  { name: 'Content-Length and Transfer-Encoding', send: raw('POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n'), expect: envelope(400) },
  { name: 'Transfer-Encoding gzip', send: raw('POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n{}'), expect: envelope([400, 411, 415, 501]) },
  { name: 'Transfer-Encoding gzip, chunked', send: raw('POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n'), expect: envelope([400, 415, 501]) },
  { name: 'a bad chunk size', send: raw('POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n'), expect: envelope(400) },
  { name: 'an Expect header other than 100-continue', send: call('POST', '/v1/batches', { headers: { ...JSON_TYPE, expect: 'teapot' }, body: '{}' }), expect: envelope(417, '', 'expectation_failed') },
  { name: 'HTTP/1.1 without Host', send: raw('GET /v1/files HTTP/1.1\r\nConnection: close\r\n\r\n'), expect: envelope(400) },
  { name: 'body shorter than its Content-Length', send: raw('POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"job_id":', { endAfterWrite: true }), expect: envelope(400) },
];

const multipartCases: Case[] = [
  { name: 'upload without file', send: upload([['purpose', 'batch']]), expect: missing('file') },
  { name: 'upload without purpose', send: upload([FILE]), expect: missing('purpose') },
  { name: 'upload with purpose homework', send: upload([['purpose', 'homework'], FILE]), expect: invalid('purpose', /batch/) },
  { name: 'upload with purpose batch_output', send: upload([['purpose', 'batch_output'], FILE]), expect: invalid('purpose') },
  { name: 'upload with an empty purpose', send: upload([['purpose', ''], FILE]), expect: envelope(400, 'purpose') },
  { name: 'upload with purpose after the file, bad', send: upload([FILE, ['purpose', 'nope']]), expect: invalid('purpose') },
  { name: 'upload with purpose twice', send: upload([['purpose', 'batch'], ['purpose', 'user_data'], FILE]), expect: envelope(400, 'purpose', 'duplicate_parameter') },
  { name: 'upload with the same purpose twice', send: upload([['purpose', 'batch'], ['purpose', 'batch'], FILE]), expect: envelope(400, 'purpose', 'duplicate_parameter') },
  { name: 'upload with purpose before and after the file', send: upload([['purpose', 'batch'], FILE, ['purpose', 'batch']]), expect: envelope(400, 'purpose', 'duplicate_parameter') },
  {
    name: 'upload with expires_after[anchor] twice',
    send: upload([['purpose', 'batch'], ['expires_after[anchor]', 'created_at'], ['expires_after[anchor]', 'created_at'], ['expires_after[seconds]', '3600'], FILE]),
    expect: envelope(400, 'expires_after[anchor]', 'duplicate_parameter'),
  },
  {
    name: 'upload with expires_after[seconds] twice',
    send: upload([['purpose', 'batch'], ['expires_after[anchor]', 'created_at'], ['expires_after[seconds]', '3600'], ['expires_after[seconds]', '7200'], FILE]),
    expect: envelope(400, 'expires_after[seconds]', 'duplicate_parameter'),
  },
  {
    name: 'upload with expires_after JSON twice',
    send: upload([['purpose', 'batch'], ['expires_after', '{"anchor":"created_at","seconds":3600}'], ['expires_after', '{"anchor":"created_at","seconds":3600}'], FILE]),
    expect: envelope(400, 'expires_after', 'duplicate_parameter'),
  },
  { name: 'upload with two files', send: upload([['purpose', 'batch'], FILE, ['file', LINE, 'second.jsonl']]), expect: envelope(400, 'file', 'duplicate_parameter') },
  { name: 'upload with the file under another name', send: upload([['purpose', 'batch'], ['document', LINE, 'input.jsonl']]), expect: envelope(400, 'document') },
  { name: 'upload with the content as a plain field', send: upload([['purpose', 'batch'], ['file', LINE]]), expect: envelope(400, 'file') },
  { name: 'upload expires_after[seconds] abc', send: upload([['purpose', 'batch'], ['expires_after[anchor]', 'created_at'], ['expires_after[seconds]', 'abc'], FILE]), expect: invalid('expires_after.seconds') },
  { name: 'upload expires_after[seconds] 3599', send: upload([['purpose', 'batch'], ['expires_after[anchor]', 'created_at'], ['expires_after[seconds]', '3599'], FILE]), expect: invalid('expires_after.seconds', /3600/) },
  { name: 'upload expires_after[seconds] 2592001', send: upload([['purpose', 'batch'], ['expires_after[anchor]', 'created_at'], ['expires_after[seconds]', '2592001'], FILE]), expect: invalid('expires_after.seconds') },
  { name: 'upload expires_after[seconds] 3600.5', send: upload([['purpose', 'batch'], ['expires_after[anchor]', 'created_at'], ['expires_after[seconds]', '3600.5'], FILE]), expect: invalid('expires_after.seconds') },
  { name: 'upload expires_after[seconds] empty', send: upload([['purpose', 'batch'], ['expires_after[anchor]', 'created_at'], ['expires_after[seconds]', ''], FILE]), expect: invalid('expires_after.seconds') },
  { name: 'upload expires_after[anchor] now', send: upload([['purpose', 'batch'], ['expires_after[anchor]', 'now'], ['expires_after[seconds]', '3600'], FILE]), expect: invalid('expires_after.anchor') },
  { name: 'upload expires_after without anchor', send: upload([['purpose', 'batch'], ['expires_after[seconds]', '3600'], FILE]), expect: envelope(400, 'expires_after.anchor') },
  { name: 'upload expires_after without seconds', send: upload([['purpose', 'batch'], ['expires_after[anchor]', 'created_at'], FILE]), expect: envelope(400, 'expires_after.seconds') },
  { name: 'upload expires_after not JSON', send: upload([['purpose', 'batch'], ['expires_after', '{anchor: created_at}'], FILE]), expect: invalid('expires_after') },
  { name: 'upload expires_after a JSON array', send: upload([['purpose', 'batch'], ['expires_after', '[]'], FILE]), expect: invalid('expires_after') },
  { name: 'upload expires_after seconds a string', send: upload([['purpose', 'batch'], ['expires_after', '{"anchor":"created_at","seconds":"3600"}'], FILE]), expect: invalid('expires_after.seconds') },
  {
    name: 'upload expires_after as JSON and as fields',
    send: upload([['purpose', 'batch'], ['expires_after', '{"anchor":"created_at","seconds":3600}'], ['expires_after[anchor]', 'created_at'], FILE]),
    expect: invalid('expires_after'),
  },
  {
    name: 'upload expires_after as a JSON-typed part, wrong',
    send: upload([['purpose', 'batch'], ['expires_after', '{"anchor":"created_at","seconds":1}', undefined, 'application/json'], FILE]),
    expect: invalid('expires_after.seconds'),
  },
  { name: 'upload a huge purpose field', send: upload([['purpose', long(70 * KIB)], FILE]), expect: envelope([400, 413], 'purpose') },
  { name: 'upload a huge field of another name', send: upload([['note', long(70 * KIB)], ['purpose', 'batch'], FILE]), expect: envelope([400, 413], 'note') },
  { name: 'upload with too many fields', send: upload([...Array.from({ length: 12 }, (_, index) => [`f${index}`, 'x'] as const), ['purpose', 'batch'], FILE]), expect: envelope([400, 413]) },
  { name: 'upload over the batch limit', send: upload([['purpose', 'batch'], ['file', Buffer.alloc(LIMITS.maxBatchFileBytes + 1, 'a'), 'big.jsonl']]), expect: envelope(413, 'file', 'file_too_large', /bytes/) },
  { name: 'upload over the batch limit, purpose last', send: upload([['file', Buffer.alloc(LIMITS.maxBatchFileBytes + 1, 'a'), 'big.jsonl'], ['purpose', 'batch']]), expect: envelope(413, 'file', 'file_too_large') },
  { name: 'upload without a boundary', send: call('POST', '/v1/files', { headers: { 'content-type': 'multipart/form-data' }, body: formBody([['purpose', 'batch'], FILE]) }), expect: envelope(400, 'file', 'invalid_multipart') },
  {
    name: 'upload with a boundary not used in the body',
    send: call('POST', '/v1/files', { headers: { 'content-type': 'multipart/form-data; boundary=other' }, body: formBody([['purpose', 'batch'], FILE]) }),
    expect: envelope(400),
  },
  {
    name: 'upload without the closing boundary',
    send: call('POST', '/v1/files', { headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body: formBody([['purpose', 'batch'], FILE], { close: false }) }),
    expect: envelope(400, 'file', 'invalid_multipart'),
  },
  {
    name: 'upload with a part without headers',
    send: call('POST', '/v1/files', { headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body: `--${BOUNDARY}\r\n\r\nbatch\r\n--${BOUNDARY}--\r\n` }),
    expect: envelope(400),
  },
  { name: 'upload an empty multipart body', send: call('POST', '/v1/files', { headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body: '' }), expect: envelope(400) },
  {
    name: 'upload cut off by the client',
    send: raw(
      Buffer.concat([
        Buffer.from(`POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=${BOUNDARY}\r\nContent-Length: 100000\r\n\r\n`),
        formBody([['purpose', 'batch'], FILE], { close: false }),
      ]),
      { endAfterWrite: true },
    ),
    expect: envelope(400),
  },
  { name: 'upload as JSON', send: sendJson('/v1/files', { purpose: 'batch', file: LINE }), expect: envelope([400, 415], 'file') },
  { name: 'upload as text/plain', send: call('POST', '/v1/files', { headers: { 'content-type': 'text/plain' }, body: LINE }), expect: envelope(415) },
  { name: 'upload with no body at all', send: call('POST', '/v1/files'), expect: envelope([400, 415]) },
  { name: 'upload gzip-encoded', send: upload([['purpose', 'batch'], FILE], { 'content-encoding': 'gzip' }), expect: envelope(415, '', 'unsupported_content_encoding') },
];

const AUTH_VARIANTS = [
  '/%6dgmt/v1/jobs',
  '/%6Dgmt/v1/jobs',
  '//mgmt/v1/jobs',
  '/v1/../mgmt/v1/jobs',
  '/./mgmt/v1/jobs',
  '/MGMT/v1/jobs',
  '/Mgmt/v1/jobs',
  '/mgmt/v1/jobs/',
  '/mgmt//v1/jobs',
  '/%63ompat/v1/models',
  '//compat/v1/models',
  '/COMPAT/v1/models',
  '/compat/v1/models/',
];
const authCases: Case[] = [
  { name: 'mgmt without a token', send: call('GET', '/mgmt/v1/jobs'), expect: envelope(401, '', 'invalid_api_key') },
  { name: 'mgmt with a wrong token', send: call('GET', '/mgmt/v1/jobs', { headers: { authorization: 'Bearer wrong' } }), expect: envelope(401, '', 'invalid_api_key') },
  { name: 'mgmt with Basic credentials', send: call('GET', '/mgmt/v1/jobs', { headers: { authorization: `Basic ${Buffer.from(`x:${TEST_API_KEY}`).toString('base64')}` } }), expect: envelope(401) },
  { name: 'mgmt POST without a token', send: sendJson('/mgmt/v1/jobs', JOB), expect: envelope(401) },
  { name: 'compat without a token', send: call('GET', '/compat/v1/models'), expect: envelope(401, '', 'invalid_api_key') },
  { name: 'compat with a wrong token', send: sendJson('/compat/v1/chat/completions', { model: 'spool-tiny', messages: [] }, { authorization: 'Bearer nope' }), expect: envelope(401) },
  ...AUTH_VARIANTS.map((path) => ({ name: `path variant ${path} without a token`, send: call('GET', path), expect: envelope([401, 404]) })),
];

/** Lines that break the batch input rules: the batch is created, then fails validation with this error. */
interface ContentCase {
  readonly name: string;
  readonly content: string | Buffer;
  readonly endpoint?: string;
  readonly error: { code: string; line: number | null; param: string | null };
}

const chat = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body: { messages: [{ role: 'user', content: 'hi' }] }, ...extra });
const tinyLine = (index: number) => `{"custom_id":"${index}","method":"POST","url":"/v1/chat/completions","body":{}}`;

const contentCases: ContentCase[] = [
  { name: 'a line that is not JSON', content: `${chat('a')}\nnot json\n`, error: { code: 'invalid_json_line', line: 2, param: null } },
  { name: 'a line that is a JSON array', content: `[1,2]\n`, error: { code: 'invalid_json_line', line: 1, param: null } },
  { name: 'a line with invalid UTF-8 between tokens', content: Buffer.concat([Buffer.from(`${chat('a')}\n{"custom_id":"b",`), Buffer.from([0xff, 0xfe]), Buffer.from('"method":"POST"}\n')]), error: { code: 'invalid_json_line', line: 2, param: null } },
  { name: 'a url that is not the endpoint', content: `${chat('a', { url: '/v1/embeddings' })}\n`, error: { code: 'url_mismatch', line: 1, param: 'url' } },
  { name: 'method GET', content: `${chat('a', { method: 'GET' })}\n`, error: { code: 'invalid_request', line: 1, param: 'method' } },
  { name: 'no custom_id', content: `${JSON.stringify({ method: 'POST', url: '/v1/chat/completions', body: {} })}\n`, error: { code: 'invalid_request', line: 1, param: 'custom_id' } },
  { name: 'custom_id a number', content: `${chat('a', { custom_id: 5 })}\n`, error: { code: 'invalid_request', line: 1, param: 'custom_id' } },
  { name: 'custom_id empty', content: `${chat('a', { custom_id: '' })}\n`, error: { code: 'invalid_request', line: 1, param: 'custom_id' } },
  { name: 'body not an object', content: `${chat('a', { body: 'hello' })}\n`, error: { code: 'invalid_request', line: 1, param: 'body' } },
  { name: 'a duplicate custom_id', content: `${chat('a')}\n${chat('b')}\n${chat('a')}\n`, error: { code: 'duplicate_custom_id', line: 3, param: 'custom_id' } },
  { name: 'another model than the job', content: `${chat('a', { body: { model: 'other-model', messages: [] } })}\n`, error: { code: 'model_mismatch', line: 1, param: 'body.model' } },
  { name: 'an empty file', content: '', error: { code: 'empty_file', line: null, param: 'input_file_id' } },
  { name: 'only blank lines', content: '\n\n\n', error: { code: 'empty_file', line: null, param: 'input_file_id' } },
  {
    name: 'more than 50,000 requests',
    content: `${Array.from({ length: 50_001 }, (_, index) => tinyLine(index)).join('\n')}\n`,
    error: { code: 'too_many_tasks', line: 50_001, param: null },
  },
  {
    name: 'more than 50,000 embedding inputs',
    endpoint: '/v1/embeddings',
    content: `${JSON.stringify({ custom_id: 'e', method: 'POST', url: '/v1/embeddings', body: { input: Array.from({ length: 50_001 }, () => 'x') } })}\n`,
    error: { code: 'too_many_embedding_inputs', line: null, param: 'input' },
  },
];

// --- the suite ----------------------------------------------------------------------------------

describe('bad input, endpoint by endpoint', () => {
  beforeAll(async () => {
    service = await startTestService({ limits: LIMITS });
    const input = await uploadFile(service.url, { purpose: 'batch', filename: 'good.jsonl', content: LINE });
    expect(input.status).toBe(200);
    inputFileId = ((await input.json()) as { id: string }).id;
    const other = await uploadFile(service.url, { purpose: 'user_data', filename: 'notes.txt', content: 'notes' });
    userDataFileId = ((await other.json()) as { id: string }).id;
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
