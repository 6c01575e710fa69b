import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../src/platform/package-root.js';
import { type HttpAnswer, httpExchange } from './support/raw-socket.js';
import { TEST_API_KEY, type WholeService, startTestService, uploadFile } from './support/service.js';

/**
 * Numbers at the HTTP boundary: every numeric field of every request body, form and query is
 * refused, naming the field, when it is beyond the double range (1e309 parses to Infinity) or out
 * of its bounds — never a 500, never an event written. The fields are read from the request
 * schemas themselves, so a numeric field added later without bounds or cases here fails the suite.
 */

const AUTH = { authorization: `Bearer ${TEST_API_KEY}` };
const JSON_TYPE = { 'content-type': 'application/json' };
const BOUNDARY = 'numbers-boundary-7d2e';
const HUGE_DIGITS = '9'.repeat(400);
const NO_FILE = 'file-000000000000000000000000';
const NO_BATCH = 'batch_000000000000000000000000';

let service: WholeService;
let inputFileId = '';

// --- the numeric fields the request schemas declare ----------------------------------------------

interface NumericField {
  readonly type: string;
  readonly minimum: unknown;
  readonly maximum: unknown;
}

type SchemaNode = { type?: string | string[]; properties?: Record<string, SchemaNode>; minimum?: unknown; maximum?: unknown };

/** `Schema:path` of every integer or number property of the schemas requests are checked against. */
function numericRequestFields(): Map<string, NumericField> {
  const fields = new Map<string, NumericField>();
  const directory = join(packageRoot, 'schemas', 'http');
  for (const file of readdirSync(directory).filter((name) => /(Request|Form|Query|Params)\.json$/.test(name))) {
    const schemaName = file.replace(/\.json$/, '');
    const visit = (node: SchemaNode, path: string) => {
      const types = Array.isArray(node.type) ? node.type : [node.type];
      const numeric = types.find((type) => type === 'integer' || type === 'number');
      if (numeric) fields.set(`${schemaName}:${path}`, { type: numeric, minimum: node.minimum, maximum: node.maximum });
      for (const [name, child] of Object.entries(node.properties ?? {})) visit(child, path ? `${path}.${name}` : name);
    };
    visit(JSON.parse(readFileSync(join(directory, file), 'utf8')) as SchemaNode, '');
  }
  return fields;
}

// --- ways of sending ------------------------------------------------------------------------------

/** `body` as JSON with `literal` written as is at `path`: JSON.stringify cannot write 1e309. */
function jsonWith(body: Record<string, unknown>, path: string, literal: string): string {
  const copy = structuredClone(body) as Record<string, unknown>;
  const keys = path.split('.');
  let node = copy;
  for (const key of keys.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>;
  node[keys.at(-1)!] = '<number>';
  return JSON.stringify(copy).replace('"<number>"', literal);
}

const postJson = (path: string, body: string, headers: Record<string, string> = {}) => () =>
  httpExchange(service.url, { method: 'POST', path, headers: { ...JSON_TYPE, ...headers }, body });
const get = (path: string, headers: Record<string, string> = {}) => () => httpExchange(service.url, { method: 'GET', path, headers });

const JOB = { job_id: 'numbers-job', model: 'spool-tiny', use_case: 'tests', sla: '24h', price_1m_tokens: 1 };
const reserveWith = (literal: string) => postJson('/mgmt/v1/jobs', jsonWith(JOB, 'price_1m_tokens', literal), AUTH);
const createBatchWith = (literal: string) => () =>
  postJson('/v1/batches', jsonWith({ input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-demo', output_expires_after: { anchor: 'created_at' } }, 'output_expires_after.seconds', literal))();

/** An upload whose form carries the given text fields (and optional content types) before the file. */
function uploadWith(fields: ReadonlyArray<readonly [name: string, value: string, contentType?: string]>) {
  const parts = [...fields.map(([name, value, type]) => `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n${type ? `Content-Type: ${type}\r\n` : ''}\r\n${value}\r\n`)];
  parts.push(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n{"custom_id":"a"}\n\r\n--${BOUNDARY}--\r\n`);
  return () => httpExchange(service.url, { method: 'POST', path: '/v1/files', headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body: parts.join('') });
}
const bracketSeconds = (seconds: string) => uploadWith([['purpose', 'batch'], ['expires_after[anchor]', 'created_at'], ['expires_after[seconds]', seconds]]);
const jsonSeconds = (literal: string, contentType?: string) => uploadWith([['purpose', 'batch'], ['expires_after', `{"anchor":"created_at","seconds":${literal}}`, contentType]]);

// --- expectations ---------------------------------------------------------------------------------

type Expectation = { readonly shape: 'envelope'; readonly param: string; readonly message?: RegExp } | { readonly shape: 'validation'; readonly loc: readonly string[] };
const refused = (param: string, message?: RegExp): Expectation => ({ shape: 'envelope', param, ...(message ? { message } : {}) });
const notFinite = (param: string) => refused(param, /finite/);
const queryRefused = (name: string): Expectation => ({ shape: 'validation', loc: ['query', name] });

interface Case {
  readonly name: string;
  readonly send: () => Promise<HttpAnswer>;
  readonly expect: Expectation;
}

function check(answer: HttpAnswer, expected: Expectation): void {
  const context = `${answer.status} ${answer.body.slice(0, 400)}`;
  expect(String(answer.headers['content-type']), context).toMatch(/^application\/json/);
  const body = JSON.parse(answer.body) as Record<string, unknown>;
  if (expected.shape === 'validation') {
    expect(answer.status, context).toBe(422);
    expect((body.detail as Array<{ loc: string[] }>)[0]!.loc, context).toEqual(expected.loc);
    return;
  }
  expect(answer.status, context).toBe(400);
  expect(Object.keys(body), context).toEqual(['error']);
  const error = body.error as Record<string, unknown>;
  expect(Object.keys(error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(error, context).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: expected.param });
  if (expected.message) expect(error.message, context).toMatch(expected.message);
}

// --- the cases, per field ---------------------------------------------------------------------------

const limitCases = (label: string, path: string, max: number, headers: Record<string, string> = {}): Case[] =>
  ['1e309', '-1e309', HUGE_DIGITS, String(max + 1), '0'].map((value) => ({
    name: `${label} limit=${value.length > 20 ? '9×400' : value}`,
    send: get(`${path}${path.includes('?') ? '&' : '?'}limit=${value}`, headers),
    expect: queryRefused('limit'),
  }));

const CASES: Record<string, readonly Case[]> = {
  'ReserveJobRequest:price_1m_tokens': [
    { name: 'reserve job: price 1e309', send: reserveWith('1e309'), expect: notFinite('price_1m_tokens') },
    { name: 'reserve job: price -1e309', send: reserveWith('-1e309'), expect: notFinite('price_1m_tokens') },
    { name: 'reserve job: price 1e300', send: reserveWith('1e300'), expect: refused('price_1m_tokens', /<= 1000000/) },
    { name: 'reserve job: price 1000000.5', send: reserveWith('1000000.5'), expect: refused('price_1m_tokens', /<= 1000000/) },
    { name: 'reserve job: price -0.5', send: reserveWith('-0.5'), expect: refused('price_1m_tokens', />= 0/) },
  ],
  'CreateBatchRequest:output_expires_after.seconds': [
    { name: 'create batch: output_expires_after.seconds 1e309', send: createBatchWith('1e309'), expect: notFinite('output_expires_after.seconds') },
    { name: 'create batch: output_expires_after.seconds -1e309', send: createBatchWith('-1e309'), expect: notFinite('output_expires_after.seconds') },
    { name: 'create batch: output_expires_after.seconds 1e20', send: createBatchWith('1e20'), expect: refused('output_expires_after.seconds', /2592000/) },
    { name: 'create batch: output_expires_after.seconds -3600', send: createBatchWith('-3600'), expect: refused('output_expires_after.seconds', /3600/) },
  ],
  'UploadFileForm:expires_after.seconds': [
    { name: 'upload: expires_after[seconds] 1e309', send: bracketSeconds('1e309'), expect: refused('expires_after.seconds') },
    { name: 'upload: expires_after[seconds] -1e309', send: bracketSeconds('-1e309'), expect: refused('expires_after.seconds') },
    { name: 'upload: expires_after[seconds] of 400 digits', send: bracketSeconds(HUGE_DIGITS), expect: refused('expires_after.seconds') },
    { name: 'upload: expires_after[seconds] -400 digits', send: bracketSeconds(`-${HUGE_DIGITS}`), expect: refused('expires_after.seconds') },
    { name: 'upload: expires_after[seconds] 2592001', send: bracketSeconds('2592001'), expect: refused('expires_after.seconds', /2592000/) },
    { name: 'upload: expires_after JSON with seconds 1e309', send: jsonSeconds('1e309'), expect: refused('expires_after.seconds') },
    { name: 'upload: expires_after JSON with seconds -1e309', send: jsonSeconds('-1e309'), expect: refused('expires_after.seconds') },
    { name: 'upload: expires_after JSON-typed part with seconds 1e309', send: jsonSeconds('1e309', 'application/json'), expect: refused('expires_after.seconds') },
  ],
  'ListFilesQuery:limit': limitCases('list files', '/v1/files', 10_000),
  'ListBatchesQuery:limit': limitCases('list batches', '/v1/batches', 100),
  'HistoryQuery:limit': [
    ...limitCases('file events', `/v1/files/${NO_FILE}/events`, 1000),
    ...limitCases('weights events', '/mgmt/v1/weights/spool-tiny/events', 1000, AUTH),
    ...limitCases('webhook events', '/mgmt/v1/webhooks/wh_000000000000000000000000/events', 1000, AUTH),
  ],
  'BatchHistoryQuery:limit': [...limitCases('batch events', `/v1/batches/${NO_BATCH}/events`, 1000), ...limitCases('batch event stream', `/v1/batches/${NO_BATCH}/events?stream=true`, 1000)],
};

/** Bodies no schema types (passed on to the engines): their numbers must be finite all the same. */
const chat = { model: 'spool-tiny', messages: [{ role: 'user', content: 'hi' }] };
const UNTYPED_CASES: readonly Case[] = [
  { name: 'compat chat: temperature 1e309', send: postJson('/compat/v1/chat/completions', jsonWith(chat, 'temperature', '1e309'), AUTH), expect: notFinite('temperature') },
  { name: 'compat chat: a logit bias of -1e309', send: postJson('/compat/v1/chat/completions', jsonWith(chat, 'logit_bias.50256', '-1e309'), AUTH), expect: notFinite('logit_bias.50256') },
  { name: 'compat chat: a number deep in an array', send: postJson('/compat/v1/chat/completions', JSON.stringify(chat).replace('"hi"', '[{"type":"text","text":"hi","weight":1e999}]'), AUTH), expect: notFinite('messages.0.content.0.weight') },
  { name: 'create batch: an unknown field 1e309', send: () => postJson('/v1/batches', jsonWith({ input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-demo' }, 'surprise', '1e309'))(), expect: notFinite('surprise') },
  { name: 'reserve job: a body that is 1e309', send: postJson('/mgmt/v1/jobs', '1e309', AUTH), expect: notFinite('') },
];

// --- the suite ------------------------------------------------------------------------------------

describe('numbers at the HTTP boundary', () => {
  beforeAll(async () => {
    service = await startTestService();
    const input = await uploadFile(service.url, { purpose: 'batch', filename: 'good.jsonl', content: '{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}\n' });
    expect(input.status).toBe(200);
    inputFileId = ((await input.json()) as { id: string }).id;
  });
  afterAll(async () => {
    await service?.close();
  });

  it('finds the numeric fields in the request schemas, each with finite bounds', () => {
    const fields = numericRequestFields();
    expect(fields.size).toBeGreaterThanOrEqual(7);
    for (const [name, field] of fields) {
      expect(Number.isFinite(field.minimum), `${name} minimum`).toBe(true);
      expect(Number.isFinite(field.maximum), `${name} maximum`).toBe(true);
    }
  });

  it('has cases for every numeric field, and for no field the schemas do not declare', () => {
    expect(Object.keys(CASES).sort()).toEqual([...numericRequestFields().keys()].sort());
  });

  it.each(Object.values(CASES).flat().concat(UNTYPED_CASES).map((testCase) => [testCase.name, testCase] as const))('%s', async (_name, testCase) => {
    check(await testCase.send(), testCase.expect);
  });

  it('still takes the bounds themselves, and wrote nothing for what it refused', async () => {
    const atMost = await reserveWith('1000000')();
    expect(atMost.status, atMost.body).toBe(201);
    const atLeast = await postJson('/mgmt/v1/jobs', jsonWith({ ...JOB, job_id: 'numbers-free' }, 'price_1m_tokens', '0'), AUTH)();
    expect(atLeast.status, atLeast.body).toBe(201);
    const longest = await createBatchWith('2592000')();
    expect(longest.status, longest.body).toBe(200);
    expect((await get('/v1/files?limit=10000')()).status).toBe(200);

    const jobs = JSON.parse((await get('/mgmt/v1/jobs', AUTH)()).body) as { data: Array<{ job_id: string; price_1m_tokens: number }> };
    expect(jobs.data.filter((job) => job.job_id.startsWith('numbers-')).map((job) => [job.job_id, job.price_1m_tokens])).toEqual([
      ['numbers-job', 1_000_000],
      ['numbers-free', 0],
    ]);
    // Only the upload made at the start and the batch taken just now: every refused request left nothing.
    const events = await service.eventStore.readAll({ maxCount: 10_000 });
    expect(events.filter((event) => event.type === 'FileUploaded')).toHaveLength(1);
    expect(events.filter((event) => event.type === 'BatchCreated')).toHaveLength(1);
    const ready = await get('/ready')();
    expect(ready.status).toBe(200);
  });
});
