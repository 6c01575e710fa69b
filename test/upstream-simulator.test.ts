import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startNode, stop } from './support/processes.js';
import { engineLoadFrom } from '../src/engine/engine-load-metrics.js';
import { packageRoot } from '../src/platform/package-root.js';

// The benchmark upstream (bench/upstream.ts) in its own process, over real HTTP. It stands in for
// a GPU inference server (vLLM, SGLang) that cannot run here, following their documented HTTP
// contracts: OpenAI's completions, chat completions (whole or streamed as server-sent events) and
// embeddings, vLLM's `priority` field and its /metrics gauges. Its fixed-latency mode answers after
// a set time; its engine mode (--engine) steps a continuous-batching model of such an engine.
const children: ChildProcess[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((child) => stop(child)));
});

async function upstream(args: string[]): Promise<string> {
  const { child, match } = await startNode(join(packageRoot, 'dist/bench/upstream.js'), args, {}, /listening on (\d+)/);
  children.push(child);
  return `http://127.0.0.1:${match[1]}`;
}

const metrics = async (url: string) => engineLoadFrom(await (await fetch(`${url}/metrics`)).text());

/** Sends one request per priority, each once the previous one is seen waiting; answers their service order. */
async function serviceOrder(url: string): Promise<Record<string, number>> {
  const send = (name: string, priority?: number) =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: name }], ...(priority === undefined ? {} : { priority }) }),
    }).then(async (response) => ({ name, order: Number((response.headers.get('x-request-id') ?? '').replace('req_', '')), status: response.status, body: await response.text() }));
  const answers = [send('first', 5)];
  const waitFor = async (waiting: number) => {
    for (let i = 0; i < 200 && (await metrics(url)).waiting !== waiting; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  };
  await waitFor(0);
  const queued: Array<[string, number | undefined]> = [['loose', 10], ['tight', 1], ['tight-later', 1], ['none', undefined]];
  for (const [index, [name, priority]] of queued.entries()) {
    answers.push(send(name, priority));
    await waitFor(index + 1);
  }
  expect(await metrics(url)).toEqual({ running: 1, waiting: 4, kvUsage: 1 });
  const done = await Promise.all(answers);
  for (const answer of done) expect(answer.status, answer.body).toBe(200);
  return Object.fromEntries(done.map((answer) => [answer.name, answer.order]));
}

describe('the upstream simulator', () => {
  it('serves in arrival order by default, whatever the priority field says', async () => {
    const url = await upstream(['200', '1']);
    expect(await serviceOrder(url)).toEqual({ first: 1, loose: 2, tight: 3, 'tight-later': 4, none: 5 });
    // GET /log lists the requests in the order they started, with their marker and priority.
    const log = (await (await fetch(`${url}/log`)).json()) as { started: Array<{ marker: string; priority: number }> };
    expect(log.started).toEqual([
      { marker: 'first', priority: 5 },
      { marker: 'loose', priority: 10 },
      { marker: 'tight', priority: 1 },
      { marker: 'tight-later', priority: 1 },
      { marker: 'none', priority: 0 },
    ]);
  });

  it('with --policy priority serves the lowest priority value first, ties by arrival, as vLLM does', async () => {
    const url = await upstream(['200', '1', '--policy', 'priority']);
    // No priority field counts as 0, vLLM's default.
    expect(await serviceOrder(url)).toEqual({ first: 1, none: 2, tight: 3, 'tight-later': 4, loose: 5 });
    const stats = (await (await fetch(`${url}/stats`)).json()) as { served: number; maxActive: number; latencyByPriority: Record<string, { count: number; p50Ms: number }> };
    expect(stats.served).toBe(5);
    expect(stats.maxActive).toBe(1);
    expect(stats.latencyByPriority['1']!.count).toBe(2);
    expect(stats.latencyByPriority['10']!.p50Ms).toBeGreaterThan(stats.latencyByPriority['0']!.p50Ms);
  });

  it('reports vLLM-style load metrics in Prometheus text format', async () => {
    const url = await upstream(['0', '4']);
    const text = await (await fetch(`${url}/metrics`)).text();
    expect(text).toContain('# TYPE vllm:num_requests_running gauge');
    expect(engineLoadFrom(text)).toEqual({ running: 0, waiting: 0, kvUsage: 0 });
  });

  it('rejects an unknown policy by name', async () => {
    await expect(upstream(['0', '4', '--policy', 'lottery'])).rejects.toThrow(/--policy.*fcfs.*priority/);
  });
});

describe("the upstream simulator's prefix cache", () => {
  type Usage = { prompt_tokens: number; total_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
  const usage = async (url: string, path: string, body: object): Promise<Usage> => {
    const response = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', ...body }) });
    expect(response.status).toBe(200);
    return ((await response.json()) as { usage: Usage }).usage;
  };
  // 4 characters a token, blocks of 16 tokens: 64 characters make one block. Each prefix is two
  // full blocks (32 tokens); the "?" after it is part of no full block, so never cached.
  const prefix = (letter: string) => letter.repeat(128);
  const cachedOf = async (url: string, letter: string) => {
    const answer = await usage(url, '/v1/completions', { prompt: `${prefix(letter)}?` });
    expect(answer.prompt_tokens).toBe(33);
    return answer.prompt_tokens_details?.cached_tokens;
  };

  it('finds a shared prefix cached on the second request, and forgets the least recently used one when full', async () => {
    // 64 tokens: room for two prefixes' blocks.
    const url = await upstream(['0', '4', '--prefix-cache-tokens', '64', '--prefill-us-per-token', '0']);
    expect(await cachedOf(url, 'a')).toBe(0);
    expect(await cachedOf(url, 'a')).toBe(32);
    expect(await cachedOf(url, 'b')).toBe(0);
    // a is used again, so b is now the least recently used.
    expect(await cachedOf(url, 'a')).toBe(32);
    expect(await cachedOf(url, 'c')).toBe(0);
    // c took b's room; b coming back takes a's.
    expect(await cachedOf(url, 'b')).toBe(0);
    expect(await cachedOf(url, 'c')).toBe(32);
    expect(await cachedOf(url, 'a')).toBe(0);
    const stats = (await (await fetch(`${url}/stats`)).json()) as { served: number; promptTokens: number; cachedTokens: number };
    expect(stats).toMatchObject({ served: 8, promptTokens: 8 * 33, cachedTokens: 3 * 32 });
  });

  it("counts a chat's messages, roles and contents in order, and caches the system prompt they share", async () => {
    const url = await upstream(['0', '4', '--prefix-cache-tokens', '10000']);
    // "system\n" + 1,016 characters + "\n": 1,024 characters, 16 full blocks shared by both
    // requests; "user\n" and the question start the next block, which differs.
    const system = { role: 'system', content: 's'.repeat(1_016) };
    const first = await usage(url, '/v1/chat/completions', { messages: [system, { role: 'user', content: 'first question' }] });
    const second = await usage(url, '/v1/chat/completions', { messages: [system, { role: 'user', content: 'second question' }] });
    expect(first).toMatchObject({ prompt_tokens: Math.ceil((1_024 + 5 + 14 + 1) / 4), prompt_tokens_details: { cached_tokens: 0 } });
    expect(second).toMatchObject({ prompt_tokens: Math.ceil((1_024 + 5 + 15 + 1) / 4), prompt_tokens_details: { cached_tokens: 16 * 16 } });
    expect(second.total_tokens).toBe(second.prompt_tokens + 8);
  });

  it('answers usage as before without the prefix flags', async () => {
    const url = await upstream(['0', '4']);
    const system = { role: 'system', content: 's'.repeat(1_000) };
    for (const question of ['first', 'second']) {
      expect(await usage(url, '/v1/chat/completions', { messages: [system, { role: 'user', content: question }] })).toEqual({ prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 });
    }
    expect(await (await fetch(`${url}/stats`)).json()).not.toHaveProperty('cachedTokens');
  });

  it('rejects a prefix flag that is not a number', async () => {
    await expect(upstream(['0', '4', '--prefix-cache-tokens', 'lots'])).rejects.toThrow(/--prefix-cache-tokens must be a number/);
  });
});

describe("the upstream simulator's continuous-batching engine", () => {
  const post = (url: string, path: string, body: object, signal?: AbortSignal) =>
    fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', ...body }), ...(signal ? { signal } : {}) });
  // "user\n" + 234 characters + "\n": 240 characters, 60 tokens of 4.
  const sixtyTokens = [{ role: 'user', content: 'x'.repeat(234) }];
  const waitFor = async (url: string, wanted: (load: Awaited<ReturnType<typeof metrics>>) => boolean) => {
    for (let i = 0; i < 500 && !wanted(await metrics(url)); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    return metrics(url);
  };
  const counter = (text: string, name: string) => Number(new RegExp(`^${name}_total\\{model_name="bench-model"\\} (\\S+)$`, 'm').exec(text)?.[1]);

  it('answers chats and completions with OpenAI usage: prompt characters / 4 (at least 8), and max_tokens or the default generated', async () => {
    const url = await upstream(['--engine', 'continuous', '--speed', '20', '--default-max-tokens', '4']);
    const chat = (await (await post(url, '/v1/chat/completions', { messages: sixtyTokens, max_tokens: 6 })).json()) as { object: string; choices: Array<{ message: { content: string }; finish_reason: string }>; usage: object };
    expect(chat.object).toBe('chat.completion');
    expect(chat.usage).toEqual({ prompt_tokens: 60, completion_tokens: 6, total_tokens: 66 });
    expect(chat.choices[0]!.message.content).toBe(`echo: ${'x'.repeat(64)}${' tok'.repeat(5)}`);
    expect(chat.choices[0]!.finish_reason).toBe('length');
    const completion = (await (await post(url, '/v1/completions', { prompt: 'short' })).json()) as { object: string; choices: Array<{ text: string; finish_reason: string }>; usage: object };
    expect(completion.object).toBe('text_completion');
    expect(completion.usage).toEqual({ prompt_tokens: 8, completion_tokens: 4, total_tokens: 12 });
    expect(completion.choices[0]!.finish_reason).toBe('stop');
  });

  it('streams one chunk for each step that decodes the sequence, then [DONE]', async () => {
    const url = await upstream(['--engine', 'continuous', '--speed', '20']);
    await (await fetch(`${url}/stats`)).json();
    const response = await post(url, '/v1/chat/completions', { messages: sixtyTokens, max_tokens: 5, stream: true, stream_options: { include_usage: true } });
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const events = (await response.text()).split('\n\n').filter((event) => event !== '');
    expect(events.at(-1)).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event.replace(/^data: /, '')) as { object: string; choices: Array<{ delta: { role?: string; content: string }; finish_reason: string | null }>; usage?: object });
    expect(chunks).toHaveLength(6);
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.slice(0, 5).map((chunk) => chunk.choices[0]!.finish_reason)).toEqual([null, null, null, null, 'length']);
    expect(chunks[5]).toMatchObject({ choices: [], usage: { prompt_tokens: 60, completion_tokens: 5, total_tokens: 65 } });
    // The prompt's step gives the first token, four decode steps the others.
    expect(await (await fetch(`${url}/stats`)).json()).toMatchObject({ served: 1, steps: 5, generationTokens: 5, promptTokens: 60 });
  });

  it("reports the running batch, the waiting queue and the KV cache's use in vLLM's gauges while it holds requests", async () => {
    // Steps of 300 ms; a KV cache of 16 blocks of 16 tokens; at most two sequences in the batch.
    const url = await upstream(['--engine', 'continuous', '--max-num-seqs', '2', '--kv-cache-tokens', '256', '--step-us', '300000', '--sequence-us', '0', '--prefill-token-us', '0', '--decode-token-us', '0']);
    const abort = new AbortController();
    const answers = [1, 2, 3].map(() => post(url, '/v1/chat/completions', { messages: sixtyTokens, max_tokens: 3 }, abort.signal).catch(() => undefined));
    // Each sequence of 60 to 62 tokens holds 4 blocks.
    expect(await waitFor(url, (load) => load.running === 2 && load.waiting === 1)).toEqual({ running: 2, waiting: 1, kvUsage: 0.5 });
    // Clients that go away take their sequences out of the engine.
    abort.abort();
    await Promise.all(answers);
    expect(await waitFor(url, (load) => load.running === 0 && load.waiting === 0)).toEqual({ running: 0, waiting: 0, kvUsage: 0 });
    expect(counter(await (await fetch(`${url}/metrics`)).text(), 'vllm:request_success')).toBe(0);
  });

  it('runs concurrent requests in batches, and /stats says how large', async () => {
    const url = await upstream(['--engine', 'continuous']);
    const answers = await Promise.all(Array.from({ length: 16 }, () => post(url, '/v1/completions', { prompt: 'p', max_tokens: 8 })));
    expect(answers.map((answer) => answer.status)).toEqual(Array(16).fill(200));
    const stats = (await (await fetch(`${url}/stats`)).json()) as { served: number; steps: number; meanBatchSize: number; maxActive: number; stepsPerSecond: number; generationTokens: number; latencyByPriority: Record<string, { count: number }> };
    expect(stats).toMatchObject({ served: 16, generationTokens: 128 });
    expect(stats.steps).toBeLessThan(64);
    expect(stats.meanBatchSize).toBeGreaterThan(2);
    expect(stats.maxActive).toBeGreaterThan(2);
    expect(stats.stepsPerSecond).toBeGreaterThan(0);
    expect(stats.latencyByPriority['0']!.count).toBe(16);
  });

  it('with --policy priority lets a request of a lower priority value preempt a running one, as vLLM does', async () => {
    const url = await upstream(['--engine', 'continuous', '--policy', 'priority', '--max-num-seqs', '1', '--step-us', '20000', '--sequence-us', '0', '--prefill-token-us', '0', '--decode-token-us', '0']);
    const finished: string[] = [];
    const send = (content: string, priority: number, maxTokens: number) => post(url, '/v1/chat/completions', { messages: [{ role: 'user', content }], priority, max_tokens: maxTokens }).then(async (answer) => finished.push(`${content} ${answer.status} ${((await answer.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens}`));
    const low = send('low', 5, 20);
    await waitFor(url, (load) => load.running === 1);
    await Promise.all([low, send('high', 0, 2)]);
    expect(finished).toEqual(['high 200 2', 'low 200 20']);
    expect(counter(await (await fetch(`${url}/metrics`)).text(), 'vllm:num_preemptions')).toBe(1);
    expect(((await (await fetch(`${url}/log`)).json()) as { started: Array<{ marker: string }> }).started.map((entry) => entry.marker)).toEqual(['low', 'high']);
  });

  it('refuses what it cannot run', async () => {
    const url = await upstream(['--engine', 'continuous', '--kv-cache-tokens', '64']);
    const refusal = async (path: string, body: object) => ((await (await post(url, path, body)).json()) as { error: { message: string } }).error.message;
    expect(await refusal('/v1/chat/completions', { messages: sixtyTokens, max_tokens: 8 })).toMatch(/KV cache holds 64 tokens.*68 tokens/);
    expect(await refusal('/v1/completions', { prompt: 'p', max_tokens: 0 })).toMatch(/max_tokens must be an integer of at least 1/);
    expect(await refusal('/v1/embeddings', { input: 'p' })).toMatch(/does not support the Embeddings API/);
  });

  it('rejects engine flags it does not know or cannot use, by name', async () => {
    await expect(upstream(['--engine', 'continuous', '--kv-cache-tokens', 'lots'])).rejects.toThrow(/--kv-cache-tokens must be an integer/);
    await expect(upstream(['--engine', 'continuous', '--speed', '0'])).rejects.toThrow(/--speed must be a number above 0/);
    await expect(upstream(['--engine', 'embeddings', '--default-max-tokens', '4'])).rejects.toThrow(/--default-max-tokens applies to --engine continuous only/);
    await expect(upstream(['--engine', 'batching'])).rejects.toThrow(/--engine must be continuous or embeddings/);
  });
});

describe("the upstream simulator's embedding engine", () => {
  type Embeddings = { object: string; data: Array<{ object: string; index: number; embedding: number[] | string }>; usage: { prompt_tokens: number; total_tokens: number } };
  const embed = async (url: string, body: object) => {
    const response = await fetch(`${url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', ...body }) });
    return { status: response.status, body: (await response.json()) as Embeddings };
  };

  it('answers 384-dimension unit vectors, the same for the same text, with usage', async () => {
    const url = await upstream(['--engine', 'embeddings']);
    const { body } = await embed(url, { input: ['alpha', 'beta', 'alpha'] });
    expect(body.object).toBe('list');
    expect(body.data.map((item) => [item.object, item.index])).toEqual([['embedding', 0], ['embedding', 1], ['embedding', 2]]);
    const vectors = body.data.map((item) => item.embedding as number[]);
    for (const vector of vectors) {
      expect(vector).toHaveLength(384);
      expect(Math.hypot(...vector)).toBeCloseTo(1, 9);
    }
    expect(vectors[2]).toEqual(vectors[0]);
    expect(vectors[1]).not.toEqual(vectors[0]);
    // 4 characters a token, rounded up: 2 + 1 + 2.
    expect(body.usage).toEqual({ prompt_tokens: 5, total_tokens: 5 });
    const encoded = (await embed(url, { input: 'alpha', encoding_format: 'base64' })).body.data[0]!.embedding as string;
    const floats = new Float32Array(new Uint8Array(Buffer.from(encoded, 'base64')).buffer);
    expect([...floats].map((value, index) => Math.abs(value - vectors[0]![index]!) < 1e-6)).toEqual(Array(384).fill(true));
    expect((await embed(url, { input: [] })).status).toBe(400);
  });

  it('computes a concurrent burst in fewer steps than requests', async () => {
    // A hundredth of the calibrated speed: steps of 50 ms or more, so the burst queues behind the first.
    const url = await upstream(['--engine', 'embeddings', '--speed', '0.01']);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, index) => embed(url, { input: `sentence number ${index}` })));
    expect(answers.map((answer) => answer.body.data).every((data) => data.length === 1)).toBe(true);
    const stats = (await (await fetch(`${url}/stats`)).json()) as { served: number; steps: number; meanBatchSize: number };
    expect(stats.served).toBe(20);
    expect(stats.steps).toBeLessThan(20);
    expect(stats.meanBatchSize).toBeGreaterThan(1);
  });
});
