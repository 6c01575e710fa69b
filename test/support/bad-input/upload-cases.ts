// Bad uploads, credentials and path variants, and JSONL content (test/bad-input.test.ts).
import { TEST_API_KEY } from '../service.js';
import { BOUNDARY, type Case, FILE, JOB, KIB, LIMITS, LINE, call, envelope, formBody, invalid, long, missing, raw, sendJson, upload, validation } from './harness.js';

export const multipartCases: Case[] = [
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
export const authCases: Case[] = [
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

export const contentCases: ContentCase[] = [
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
