import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startNode, stop } from './support/processes.js';
import { engineLoadFrom } from '../src/engine/engine-load-metrics.js';
import { packageRoot } from '../src/platform/package-root.js';

// The benchmark upstream (bench/upstream.ts) in its own process, over real HTTP.
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
