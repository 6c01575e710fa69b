import type { ChildProcess } from 'node:child_process';
import { type IncomingHttpHeaders, type Server, createServer } from 'node:http';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestWithdrawnError } from '../src/engine/engine.js';
import { HttpReplica } from '../src/engine/http-replica.js';
import { JsonText } from '../src/domain/json-text.js';
import { ReplicaPool } from '../src/engine/replica-pool.js';
import { packageRoot } from '../src/platform/package-root.js';
import { startNode, stop } from './support/processes.js';

// HTTP replicas send their requests from the engine I/O thread (src/engine/io/engine-io-thread.ts).
// The upstream simulator (bench/upstream.ts) runs in its own process, so that holding this
// process's event loop holds only Spool's side of each exchange.

const children: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(children.splice(0).map((child) => stop(child)));
});

async function upstream(latencyMs: number, slots: number): Promise<string> {
  const { child, match } = await startNode(join(packageRoot, 'dist/bench/upstream.js'), [String(latencyMs), String(slots)], {}, /listening on (\d+)/);
  children.push(child);
  return `http://127.0.0.1:${match[1]}/v1`;
}

/** An answer as some engines write it: across lines, spaced, with escapes JSON.stringify does not make. */
const PRETTY_ANSWER = '{\n  "id": "cmpl-1",\n  "model": "m",\n  "choices": [ { "message": { "role": "assistant", "content": "caf\\u00e9 \\/ 1.50" } } ],\n  "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 }\n}\n';

/** Answers with no whitespace outside their strings, written otherwise than JSON.stringify would write them. */
const COMPACT_ANSWERS = [
  '{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1e-05,-0.0,1.50,2E3]}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}',
  '{"id":"cmpl-2","choices":[{"message":{"role":"assistant","content":"caf\\u00e9, a \\"quoted\\" word \\\\ and more"}}],"usage":{"prompt_tokens":1,"completion_tokens":6,"total_tokens":7}}',
];

const chat = (content: string) => ({ endpoint: '/v1/chat/completions', body: { model: 'm', messages: [{ role: 'user', content }] } });

/** Holds this process's event loop, as a burst of other work on it would. */
function holdEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

describe('the engine I/O thread', () => {
  it("measures an engine's latency where the exchange runs: the time its answer then waits for a busy event loop is not counted", async () => {
    const replica = new HttpReplica('r', 'openai', await upstream(50, 4), { timeoutMs: 10_000 });
    const sentAt = performance.now();
    const answer = replica.send(chat('held'));
    holdEventLoop(400);
    const response = await answer;
    expect(response.statusCode).toBe(200);
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(400);
    expect(response.engineLatencyMs).toBeGreaterThanOrEqual(50);
    expect(response.engineLatencyMs).toBeLessThan(400);
  });

  it('keeps the learned concurrency at its ceiling when every answer then waits for a busy event loop', async () => {
    const pool = new ReplicaPool('m', [{ replica: new HttpReplica('r', 'openai', await upstream(50, 8), { timeoutMs: 10_000 }), concurrency: 4 }], {
      maxAttempts: 1,
      backoffMs: 10,
      cooldownMs: 1000,
      learnCapacity: true,
    });
    const round = async (label: string, hold: number) => {
      const answers = Array.from({ length: 4 }, (_, index) => pool.infer({ ...chat(`${label} ${index}`), serviceClass: 'batch' }));
      // Other work holds the loop while the engine answers: each answer waits for it.
      await new Promise((resolve) => setImmediate(resolve));
      holdEventLoop(hold);
      for (const response of await Promise.all(answers)) expect(response.statusCode).toBe(200);
    };
    // The latency floor is learned on an idle loop, and the limit reaches its ceiling.
    for (let index = 0; index < 10; index++) await round(`idle ${index}`, 0);
    expect(pool.state()[0]!.limit).toBe(4);
    // Then every answer waits 300 ms for the loop, round after round: six times the engine's latency.
    for (let index = 0; index < 8; index++) {
      await round(`busy ${index}`, 300);
      expect(pool.state()[0]!.limit).toBe(4);
    }
  });

  it("fails an exchange with no answer within the replica's timeout as a TimeoutError", async () => {
    const replica = new HttpReplica('r', 'openai', await upstream(5000, 4), { timeoutMs: 200 });
    await expect(replica.send(chat('slow'))).rejects.toMatchObject({ name: 'TimeoutError' });
  });

  it('stops an exchange whose caller aborts it', async () => {
    const replica = new HttpReplica('r', 'openai', await upstream(5000, 4), { timeoutMs: 10_000 });
    const caller = new AbortController();
    const answer = replica.send({ ...chat('abandoned'), signal: caller.signal });
    setTimeout(() => caller.abort(), 50);
    await expect(answer).rejects.toMatchObject({ name: 'AbortError' });
  });
});

describe('interactive requests queueing in an engine shared with another process', () => {
  const pool = (url: string, concurrency: number, learnCapacity = true) =>
    new ReplicaPool('m', [{ replica: new HttpReplica('r', 'openai', url, { timeoutMs: 10_000 }), concurrency }], { maxAttempts: 1, backoffMs: 10, cooldownMs: 1000, learnCapacity });
  /** Keeps `count` requests of the class in flight on the pool until stopped. */
  const keepBusy = (target: ReplicaPool, count: number, serviceClass: 'batch' | 'interactive') => {
    let running = true;
    const loops = Array.from({ length: count }, async (_, index) => {
      while (running) expect((await target.infer({ ...chat(`${serviceClass} ${index}`), serviceClass })).statusCode).toBe(200);
    });
    return async () => {
      running = false;
      await Promise.all(loops);
    };
  };
  /** One at a time, each after a pause of its own: requests sent as the last is answered would keep one phase to the engine's other work. */
  const interactive = async (target: ReplicaPool, count: number) => {
    for (let index = 0; index < count; index++) {
      await new Promise((resolve) => setTimeout(resolve, (index * 17) % 50));
      expect((await target.infer({ ...chat(`interactive ${index}`), serviceClass: 'interactive' })).statusCode).toBe(200);
    }
  };

  it('the API process measures how much later than the floor its interactive requests come: about nothing on a free engine, the wait for a slot on a full one', async () => {
    const url = await upstream(50, 2);
    const api = pool(url, 4);
    // The floor is learned on the free engine: the lowest mean of three windows of 16 answers (the
    // first answers of a fresh thread and connection come late, and on a slow machine one such
    // window alone put the floor 10 ms above what the engine takes).
    await interactive(api, 52);
    const free = api.interactiveQueueing();
    expect(free).toBeDefined();
    expect(free!).toBeLessThan(3);
    // Asked again at once: nothing answered since, nothing to say.
    expect(api.interactiveQueueing()).toBeUndefined();
    // Another process (its limit a fixed 2) keeps both slots of the engine busy: each interactive request waits for one.
    const stop = keepBusy(pool(url, 2, false), 2, 'batch');
    try {
      await new Promise((resolve) => setTimeout(resolve, 100));
      await interactive(api, 24);
      expect(api.interactiveQueueing()!).toBeGreaterThan(5);
    } finally {
      await stop();
    }
  });

  it('an inference processor whose batch work fills the engine gives one slot back once interactive requests are reported queueing twice in a row, at most one every few seconds', async () => {
    const processor = pool(await upstream(50, 8), 32);
    const stop = keepBusy(processor, 40, 'batch');
    try {
      // Slow start finds the engine's 8 slots (a probe may still be settling: wait until it holds).
      let limit = 0;
      for (let round = 0; round < 50; round++) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        const now = processor.state()[0]!.limit;
        if (now === limit && now >= 6) break;
        limit = now;
      }
      limit = processor.state()[0]!.limit;
      expect(limit).toBeGreaterThanOrEqual(6);
      // Below the slack: the hosts' own delays, not a queue for a slot.
      processor.observeRemoteInteractive('api-host:1', 1, 1, 1);
      expect(processor.state()[0]!.limit).toBe(limit);
      // One report above it may be a stall of either host; two in a row from one API process are a
      // queue (one each from two, or two broken by a report without the figure, are not).
      processor.observeRemoteInteractive('api-host:1', 1, 1, 25);
      processor.observeRemoteInteractive('api-host:2', 1, 1, 25);
      processor.observeRemoteInteractive('api-host:1', 1, 1);
      processor.observeRemoteInteractive('api-host:1', 1, 1, 25);
      expect(processor.state()[0]!.limit).toBe(limit);
      processor.observeRemoteInteractive('api-host:1', 1, 1, 25);
      expect(processor.state()[0]!.limit).toBe(limit - 1);
      // The next report, a second later, still shows the queue of before the slot was given back.
      processor.observeRemoteInteractive('api-host:1', 1, 1, 25);
      expect(processor.state()[0]!.limit).toBe(limit - 1);
    } finally {
      await stop();
    }
    // A processor with no batch work on the engine is not the cause: it keeps its limit.
    const idle = pool(await upstream(50, 8), 32);
    const before = idle.state()[0]!.limit;
    idle.observeRemoteInteractive('api-host:1', 1, 1, 25);
    idle.observeRemoteInteractive('api-host:1', 1, 1, 25);
    expect(idle.state()[0]!.limit).toBe(before);
  });
});

describe('exchanges with a server in this process', () => {
  let server: Server;
  let url: string;
  const received: IncomingHttpHeaders[] = [];
  /** The body of each request, as it arrived. */
  const bodies: string[] = [];
  /** The `marker` of each request to /v1/ordered, in the order they arrived. */
  const arrived: string[] = [];
  /** Requests seen per connection: the second on any connection is dropped, as by a server that closed it while idle. */
  const perSocket = new Map<Socket, number>();

  beforeAll(async () => {
    server = createServer((request, response) => {
      const seen = (perSocket.get(request.socket) ?? 0) + 1;
      perSocket.set(request.socket, seen);
      if (request.url?.includes('/drop-reused') && seen > 1) {
        request.socket.destroy();
        return;
      }
      received.push(request.headers);
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        bodies.push(Buffer.concat(chunks).toString());
        if (request.url?.includes('/ordered')) {
          const { marker, delayMs } = JSON.parse(Buffer.concat(chunks).toString()) as { marker: string; delayMs: number };
          arrived.push(marker);
          setTimeout(() => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ marker })), delayMs);
        } else if (request.url?.includes('/pretty')) {
          // An engine that writes its JSON across lines, with spacing and escapes of its own.
          response.writeHead(200, { 'content-type': 'application/json' }).end(PRETTY_ANSWER);
        } else if (request.url?.includes('/compact')) {
          // Compact as vLLM's and SGLang's servers write it, with numbers and escapes JSON.stringify would write otherwise.
          // The second with a closing line break, as some servers end an answer.
          const n = Number(new URL(request.url, 'http://x').searchParams.get('n'));
          response.writeHead(200, { 'content-type': 'application/json' }).end(`${COMPACT_ANSWERS[n]}${n === 1 ? '\r\n' : ''}`);
        } else if (request.url?.includes('/not-json')) {
          response.writeHead(502, { 'content-type': 'text/plain' }).end('bad gateway\n');
        } else if (request.url?.includes('/busy')) {
          response.writeHead(429, { 'content-type': 'application/json', 'retry-after': '2', 'x-request-id': 'req_busy' }).end(JSON.stringify({ error: { message: 'busy' } }));
        } else {
          response.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req_ok' }).end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'ok' } }] }));
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends the API key and the trace context, and passes on the request id and Retry-After', async () => {
    const replica = new HttpReplica('r', 'openai', `${url}/v1`, { timeoutMs: 5000, apiKey: 'engine-key' });
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const response = await replica.send({ endpoint: '/v1/busy', body: { model: 'm' }, traceparent });
    expect(response).toMatchObject({ statusCode: 429, requestId: 'req_busy', retryAfterMs: 2000, body: { error: { message: 'busy' } } });
    expect(received.at(-1)).toMatchObject({ authorization: 'Bearer engine-key', traceparent, 'content-type': 'application/json' });
  });

  it("sends a replica's own headers with each of its requests, once named on the way to the thread, beside requests with headers of their own", async () => {
    const replica = new HttpReplica('r', 'openai', `${url}/v1`, { timeoutMs: 5000, apiKey: 'shared-key' });
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const before = received.length;
    // The first request carries the replica's headers whole, the second defines them, the rest name them; traced ones carry their own.
    const sent = await Promise.all(
      Array.from({ length: 6 }, (_, index) => replica.send({ endpoint: '/v1/plain', body: { model: 'm', index }, serviceClass: 'batch', ...(index % 3 === 2 ? { traceparent } : {}) })),
    );
    sent.push(await replica.send({ endpoint: '/v1/plain', body: { model: 'm', index: 6 }, serviceClass: 'batch' }));
    expect(sent.map((response) => response.statusCode)).toEqual([200, 200, 200, 200, 200, 200, 200]);
    const headers = received.slice(before);
    expect(headers).toHaveLength(7);
    for (const seen of headers) expect(seen).toMatchObject({ authorization: 'Bearer shared-key', 'content-type': 'application/json' });
    expect(headers.filter((seen) => seen.traceparent === traceparent)).toHaveLength(2);
  });

  it("sends a body given as its text byte for byte, its length counted in bytes (not characters) by the connection's client", async () => {
    const replica = new HttpReplica('r', 'openai', `${url}/v1`, { timeoutMs: 5000 });
    const text = '{ "model": "m", "messages": [{"role": "user", "content": "café 😀 \\u00e9 1.0"}] }';
    const response = await replica.send({ endpoint: '/v1/plain', body: JSON.parse(text) as Record<string, unknown>, bodyText: text, serviceClass: 'batch' });
    expect(response.statusCode).toBe(200);
    expect(bodies.at(-1)).toBe(text);
    expect(received.at(-1)!['content-length']).toBe(String(Buffer.byteLength(text)));
    expect(Buffer.byteLength(text)).toBeGreaterThan(text.length);
  });

  it("reads a batch line's answer on the I/O thread: its body comes back as compact JSON text (the engine's own where it wrote it compact) with its usage, id and model; interactive answers come parsed", async () => {
    const replica = new HttpReplica('r', 'openai', `${url}/v1`, { timeoutMs: 5000 });
    const batch = await replica.send({ endpoint: '/v1/pretty', body: { model: 'm' }, serviceClass: 'batch' });
    expect(batch.body).toBeInstanceOf(JsonText);
    const text = (batch.body as JsonText).text;
    // Spaced across lines: written out again as JSON.stringify gives it, on one line.
    expect(text).toBe(JSON.stringify(JSON.parse(PRETTY_ANSWER)));
    expect(text).not.toContain('\n');
    expect(batch.bodyFields).toEqual({ usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }, id: 'cmpl-1', model: 'm' });
    expect(JSON.parse(JSON.stringify({ body: batch.body }))).toEqual({ body: JSON.parse(PRETTY_ANSWER) });
    const interactive = await replica.send({ endpoint: '/v1/pretty', body: { model: 'm' } });
    expect(interactive.body).toEqual(JSON.parse(PRETTY_ANSWER));
    expect(interactive.bodyFields).toBeUndefined();
    // Written compact already: kept byte for byte (numbers and escapes as the engine wrote them), whitespace in strings or not.
    for (const [n, answer] of COMPACT_ANSWERS.entries()) {
      const compact = await replica.send({ endpoint: `/v1/compact?n=${n}`, body: { model: 'm' }, serviceClass: 'batch' });
      expect((compact.body as JsonText).text).toBe(answer);
      expect(answer).not.toBe(JSON.stringify(JSON.parse(answer)));
      expect(compact.bodyFields).toMatchObject({ usage: JSON.parse(answer).usage });
    }
    // Not JSON: the text as the engine sent it, as before.
    const notJson = await replica.send({ endpoint: '/v1/not-json', body: { model: 'm' }, serviceClass: 'batch' });
    expect(notJson).toMatchObject({ statusCode: 502, body: 'bad gateway\n' });
  });

  it('sends a request again on a fresh connection when the kept-alive one it went out on was closed', async () => {
    const replica = new HttpReplica('r', 'openai', `${url}/v1`, { timeoutMs: 5000 });
    const first = await replica.send({ endpoint: '/v1/drop-reused', body: { n: 1 } });
    const second = await replica.send({ endpoint: '/v1/drop-reused', body: { n: 2 } });
    expect([first.statusCode, second.statusCode]).toEqual([200, 200]);
  });

  it('holds batch requests past the limit it is given and sends each as one ends; interactive ones go out at once', async () => {
    const replica = new HttpReplica('r', 'openai', `${url}/v1`, { timeoutMs: 5000 });
    const send = (marker: string, serviceClass: 'batch' | 'interactive') =>
      replica.send({ endpoint: '/v1/ordered', body: { marker, delayMs: 150 }, serviceClass }, undefined, { limit: 1 });
    arrived.length = 0;
    const answers = [send('first', 'batch'), send('second', 'batch'), send('third', 'batch'), send('urgent', 'interactive')];
    const responses = await Promise.all(answers);
    expect(responses.map((response) => response.statusCode)).toEqual([200, 200, 200, 200]);
    // The interactive request is not held behind the batch ones (the scheduler lets it past the
    // learned limit); the batch ones go one at a time, each as the one before it ends.
    expect(arrived).toEqual(['first', 'urgent', 'second', 'third']);
    // One batch request at a time: each went out once the one before it had been answered.
    expect(responses[1]!.sent!.at).toBeGreaterThanOrEqual(responses[0]!.sent!.at + 140);
    expect(responses[2]!.sent!.at).toBeGreaterThanOrEqual(responses[1]!.sent!.at + 140);
    expect(responses[3]!.sent!.at).toBeLessThan(responses[1]!.sent!.at);
  });

  it('counts only batch requests against the gate’s limit: an interactive request in flight does not hold batch ones back', async () => {
    const replica = new HttpReplica('r', 'openai', `${url}/v1`, { timeoutMs: 5000 });
    const send = (marker: string, serviceClass: 'batch' | 'interactive', delayMs: number) =>
      replica.send({ endpoint: '/v1/ordered', body: { marker, delayMs }, serviceClass }, undefined, serviceClass === 'batch' ? { limit: 1 } : undefined);
    arrived.length = 0;
    // The limit is the slots batch work may use; the interactive request runs in the slot kept free beside them.
    const interactive = send('interactive', 'interactive', 400);
    const first = send('first', 'batch', 150);
    const second = send('second', 'batch', 150);
    const [interactiveAnswer, firstAnswer, secondAnswer] = await Promise.all([interactive, first, second]);
    expect(arrived).toEqual(['interactive', 'first', 'second']);
    expect(firstAnswer.sent!.inFlight).toBe(2);
    // The first batch request went out while the interactive one ran; the second waited for the first.
    expect(firstAnswer.sent!.at).toBeLessThan(interactiveAnswer.sent!.at + 100);
    expect(secondAnswer.sent!.at).toBeGreaterThanOrEqual(firstAnswer.sent!.at + 100);
  });

  it('counts a batch request sent without the gate (nothing held ahead yet) against the limit of the ones that come through it', async () => {
    const replica = new HttpReplica('r', 'openai', `${url}/v1`, { timeoutMs: 5000 });
    arrived.length = 0;
    const first = replica.send({ endpoint: '/v1/ordered', body: { marker: 'ungated', delayMs: 200 }, serviceClass: 'batch' });
    const second = replica.send({ endpoint: '/v1/ordered', body: { marker: 'gated', delayMs: 50 }, serviceClass: 'batch' }, undefined, { limit: 1 });
    const [firstAnswer, secondAnswer] = await Promise.all([first, second]);
    expect(arrived).toEqual(['ungated', 'gated']);
    // Held until the first ended: the engine never had two batch requests at once.
    expect(secondAnswer.sent!.at).toBeGreaterThanOrEqual(firstAnswer.sent!.at + 190);
    expect(secondAnswer.sent!.inFlight).toBe(1);
  });

  it('does not send a held request whose withdraw() turns true; the one already sent goes on', async () => {
    const replica = new HttpReplica('r', 'openai', `${url}/v1`, { timeoutMs: 5000 });
    let stopped = false;
    const send = (marker: string) => replica.send({ endpoint: '/v1/ordered', body: { marker, delayMs: 300 }, serviceClass: 'batch', withdraw: () => stopped }, undefined, { limit: 1 });
    arrived.length = 0;
    const running = send('running');
    const held = send('held');
    setTimeout(() => (stopped = true), 50);
    await expect(held).rejects.toBeInstanceOf(RequestWithdrawnError);
    expect((await running).statusCode).toBe(200);
    expect(arrived).toEqual(['running']);
  });
});
