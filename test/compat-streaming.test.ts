import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { type AddressInfo, connect } from 'node:net';
import { type Server, createServer } from 'node:http';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineLoadFrom } from '../src/engine/engine-load-metrics.js';
import { packageRoot } from '../src/platform/package-root.js';
import { startNode, stop } from './support/processes.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir } from './support/service.js';

// /compat/v1 streaming through an HTTP replica. The engine is the upstream simulator's
// continuous-batching model (bench/upstream.ts --engine continuous), standing in for a vLLM server
// (no GPU here): it follows vLLM's documented HTTP contract, streaming one server-sent chunk per
// decode step, stopping a sequence whose client goes away, and publishing vLLM's gauges.

const STEP_MS = 25;

describe('/compat/v1 streams from an HTTP replica as the engine generates', () => {
  let engine: ChildProcess;
  let engineUrl: string;
  let service: WholeService;
  let client: OpenAI;

  beforeAll(async () => {
    const started = await startNode(
      join(packageRoot, 'dist/bench/upstream.js'),
      ['--engine', 'continuous', '--step-us', String(STEP_MS * 1000), '--sequence-us', '0', '--prefill-token-us', '0', '--decode-token-us', '0'],
      {},
      /listening on (\d+)/,
    );
    engine = started.child;
    engineUrl = `http://127.0.0.1:${started.match[1]}`;
    const dir = tempDir('spool-stream');
    const fleetFile = join(dir, 'fleet.json');
    writeFileSync(fleetFile, JSON.stringify({ models: { m: { replicas: [{ kind: 'vllm', base_url: `${engineUrl}/v1`, concurrency: 8 }] } } }));
    service = await startTestService({ env: { FLEET_FILE: fleetFile } });
    client = new OpenAI({ baseURL: `${service.url}/compat/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
  });
  afterAll(async () => {
    await service?.close();
    if (engine) await stop(engine);
  });

  const engineLoad = async () => engineLoadFrom(await (await fetch(`${engineUrl}/metrics`)).text());

  it('relays each chunk as it comes (chat), with the whole answer and its usage at the end', async () => {
    const request = { model: 'm', messages: [{ role: 'user' as const, content: 'stream this' }], max_tokens: 16 };
    const whole = await client.chat.completions.create(request);
    const startedAt = Date.now();
    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    const arrivals: number[] = [];
    let text = '';
    let finish: string | null | undefined;
    let usage: OpenAI.CompletionUsage | null | undefined;
    let inFlightMidway: number | undefined;
    for await (const chunk of stream) {
      const content = chunk.choices[0]?.delta.content;
      if (content) {
        arrivals.push(Date.now() - startedAt);
        text += content;
        // While the answer streams, its slot is held.
        if (arrivals.length === 8) inFlightMidway = service.fleet.engineFor('m')!.state()[0]!.inFlight;
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    const endedAt = Date.now() - startedAt;
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    expect(usage).toEqual(whole.usage);
    // One piece per decode step, spread over the answer's time rather than all at its end.
    expect(arrivals.length).toBe(16);
    expect(arrivals[0]!).toBeLessThan(endedAt / 2);
    expect(arrivals.at(-1)! - arrivals[0]!).toBeGreaterThanOrEqual(10 * STEP_MS);
    expect(inFlightMidway).toBe(1);
    // The slot is given back with the last byte.
    await expect.poll(() => service.fleet.engineFor('m')!.state()[0]!.inFlight).toBe(0);
  });

  it('relays completions likewise', async () => {
    const stream = await client.completions.create({ model: 'm', prompt: 'once upon a time', max_tokens: 6, stream: true });
    let pieces = 0;
    let text = '';
    for await (const chunk of stream) {
      if (chunk.choices[0]?.text) pieces += 1;
      text += chunk.choices[0]?.text ?? '';
    }
    const whole = await client.completions.create({ model: 'm', prompt: 'once upon a time', max_tokens: 6 });
    expect(pieces).toBe(6);
    expect(text).toBe(whole.choices[0]!.text);
  });

  it('stops the engine request when the client goes away, and frees the slot', async () => {
    const abort = new AbortController();
    const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'a long one' }], max_tokens: 400, stream: true }, { signal: abort.signal });
    let pieces = 0;
    // The client ends its iteration when aborted (quietly or with an abort error, as it goes).
    try {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) pieces += 1;
        if (pieces === 3) abort.abort();
      }
    } catch (error) {
      expect(abort.signal.aborted, String(error)).toBe(true);
    }
    expect(pieces).toBe(3);
    // 400 steps would take 10 s: the engine lets the sequence go at once instead.
    await expect.poll(async () => (await engineLoad()).running, { timeout: 2000 }).toBe(0);
    await expect.poll(() => service.fleet.engineFor('m')!.state()[0]!.inFlight, { timeout: 2000 }).toBe(0);
  });
});

describe('/compat/v1 streaming with a client that stops reading', () => {
  // An engine that streams as fast as its socket takes it: 128 MiB of text in 16 KiB pieces,
  // counting what it has written (a stand-in: any OpenAI-compatible server streams so).
  const PIECE = 'a'.repeat(16 * 1024);
  const PIECES = 8192;
  let written = 0;
  let finished = false;
  let engine: Server;
  let service: WholeService;

  beforeAll(async () => {
    engine = createServer(async (request, response) => {
      for await (const _ of request) void _;
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (delta: object, finish: string | null) => `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      for (let index = 0; index < PIECES && !response.destroyed; index++) {
        const text = chunk({ content: PIECE }, null);
        written += text.length;
        if (!response.write(text)) await new Promise((resolve) => response.once('drain', resolve).once('close', resolve));
      }
      response.write(chunk({}, 'stop'));
      response.end('data: [DONE]\n\n');
      finished = true;
    });
    await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve));
    const dir = tempDir('spool-pressure');
    const fleetFile = join(dir, 'fleet.json');
    writeFileSync(fleetFile, JSON.stringify({ models: { m: { replicas: [{ kind: 'openai', base_url: `http://127.0.0.1:${(engine.address() as AddressInfo).port}/v1` }] } } }));
    service = await startTestService({ env: { FLEET_FILE: fleetFile } });
  });
  afterAll(async () => {
    await service?.close();
    engine?.closeAllConnections();
    await new Promise((resolve) => engine?.close(resolve));
  });

  it('stops reading the engine while the client does not read, and relays it all once the client reads again', async () => {
    const { port } = new URL(service.url);
    const socket = connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'a lot' }], stream: true });
    socket.write(`POST /compat/v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${TEST_API_KEY}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    await once(socket, 'data');
    // The client stops reading. The engine may fill the sockets' buffers on the way, no more.
    socket.pause();
    let stalled = -1;
    for (let i = 0; i < 100; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      if (written === stalled) break;
      stalled = written;
    }
    expect(written, 'the engine stalled').toBe(stalled);
    expect(written).toBeLessThan(40 * 2 ** 20);
    expect(finished).toBe(false);

    // Reading again, the client gets every piece, then the end.
    let received = 0;
    let tail = '';
    socket.on('data', (data: Buffer) => {
      received += data.length;
      tail = (tail + data.toString('latin1')).slice(-64);
    });
    socket.resume();
    for (let i = 0; i < 600 && !tail.includes('data: [DONE]'); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    socket.destroy();
    expect(finished).toBe(true);
    expect(tail).toContain('data: [DONE]');
    expect(received).toBeGreaterThan(PIECES * PIECE.length);
  }, 60_000);
});

