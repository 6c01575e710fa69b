import { request } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeEngine } from './support/fake-engine.js';
import { closing, fieldPart, fileHeader, multipartHeaders } from './support/raw-http.js';
import { TEST_API_KEY, type WholeService, startTestService } from './support/service.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Writes `head` on a raw connection, then each of `trickle` every `everyMs`; resolves when the
 * server closes the connection, with what it answered and when.
 */
function rawExchange(url: string, head: string, trickle: string[] = [], everyMs = 300): Promise<{ answer: string; closedAfterMs: number }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const started = Date.now();
    let answer = '';
    let timer: NodeJS.Timeout | undefined;
    socket.on('data', (chunk) => (answer += chunk.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ answer, closedAfterMs: Date.now() - started });
    });
    socket.on('connect', () => {
      socket.write(head);
      const left = [...trickle];
      timer = setInterval(() => {
        const next = left.shift();
        if (next === undefined) clearInterval(timer);
        else if (!socket.destroyed) socket.write(next);
      }, everyMs);
    });
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection was still open after 20 s; answer so far: ${JSON.stringify(answer)}`));
    }, 20_000).unref();
  });
}

/** The body of a raw answer, which must be the API's error envelope. */
function envelopeOf(answer: string): { error: { message: string; type: string; param: unknown; code: string } } {
  const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
  const parsed = JSON.parse(body);
  expect(Object.keys(parsed.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  return parsed;
}

describe('slow clients', () => {
  let service: WholeService;
  const engine = new FakeEngine();
  beforeAll(async () => {
    await engine.start();
    service = await startTestService({
      env: { HTTP_IDLE_TIMEOUT_SECONDS: '1', HTTP_HEADERS_TIMEOUT_SECONDS: '1', HTTP_REQUEST_TIMEOUT_SECONDS: '4', ENGINE_BASE_URL: engine.url, ENGINE_MAX_ATTEMPTS: '1' },
    });
  });
  afterAll(async () => {
    await service.close();
    await engine.stop();
  });

  const uploadHead = (contentLength: number) =>
    `POST /v1/files HTTP/1.1\r\nHost: spool\r\n${Object.entries(multipartHeaders(contentLength))
      .map(([name, value]) => `${name}: ${value}`)
      .join('\r\n')}\r\n\r\n`;

  it('closes a connection whose body stops coming (HTTP_IDLE_TIMEOUT_SECONDS)', async () => {
    const start = fieldPart('purpose', 'batch').toString() + fileHeader('stalled.jsonl').toString() + '{"custom_id":"a"';
    const { answer, closedAfterMs } = await rawExchange(service.url, uploadHead(100_000) + start);
    expect(closedAfterMs).toBeGreaterThanOrEqual(900);
    expect(closedAfterMs).toBeLessThan(3000);
    if (answer !== '') envelopeOf(answer);
  });

  it('answers 408 in the error envelope to headers that trickle in (HTTP_HEADERS_TIMEOUT_SECONDS)', async () => {
    const trickle = Array.from({ length: 30 }, (_, index) => `X-Slow-${index}: a\r\n`);
    const { answer, closedAfterMs } = await rawExchange(service.url, 'GET /v1/files HTTP/1.1\r\nHost: spool\r\n', trickle, 200);
    expect(closedAfterMs).toBeLessThan(3000);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(envelopeOf(answer).error.code).toBe('request_timeout');
  });

  it('answers 408 in the error envelope to a body that trickles past HTTP_REQUEST_TIMEOUT_SECONDS', async () => {
    const trickle = Array.from({ length: 60 }, () => 'x');
    const { answer, closedAfterMs } = await rawExchange(service.url, uploadHead(100_000) + fieldPart('purpose', 'batch').toString() + fileHeader('trickle.jsonl').toString(), trickle, 200);
    expect(closedAfterMs).toBeGreaterThanOrEqual(3900);
    expect(closedAfterMs).toBeLessThan(7000);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(envelopeOf(answer).error.code).toBe('request_timeout');
  });

  it('takes a slow but steady upload that lasts longer than the idle limit', async () => {
    const line = '{"custom_id":"r","method":"POST","url":"/v1/chat/completions","body":{}}\n';
    const pieces = [fieldPart('purpose', 'batch'), fileHeader('steady.jsonl'), ...Array.from({ length: 10 }, () => Buffer.from(line)), closing()];
    const length = pieces.reduce((sum, piece) => sum + piece.length, 0);
    const started = Date.now();
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${service.url}/v1/files`, { method: 'POST', headers: multipartHeaders(length) }, (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      void (async () => {
        for (const piece of pieces) {
          req.write(piece);
          await sleep(300);
        }
        req.end();
      })();
    });
    expect(Date.now() - started).toBeGreaterThan(3000);
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ object: 'file', bytes: 10 * line.length });
  });

  it('does not cut off a request received whole that waits longer than the idle limit for its answer', async () => {
    const answer = await fetch(`${service.url}/compat/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-chat', messages: [{ role: 'user', content: 'take your time [slow:2500]' }] }),
    });
    expect(answer.status).toBe(200);
  });

  it('refuses limits that contradict each other', async () => {
    const { loadConfig, ConfigError } = await import('../src/config.js');
    expect(() => loadConfig({ HTTP_HEADERS_TIMEOUT_SECONDS: '60', HTTP_REQUEST_TIMEOUT_SECONDS: '10' })).toThrow(ConfigError);
    expect(loadConfig({}).http).toEqual({ headersMs: 30_000, idleMs: 30_000, requestMs: 3_600_000, keepAliveMs: 72_000, eventStreamHeartbeatMs: 15_000 });
  });
});
