// The fixed-latency mode of the benchmarks' local OpenAI-compatible upstream (bench/upstream.ts),
// run as its own process:
//   node dist/bench/upstream.js LATENCY_MS CONCURRENCY [--policy fcfs|priority]
//     [--prefix-cache-tokens N] [--prefill-us-per-token U]
// Each chat completion is answered after a fixed latency; at most CONCURRENCY requests are
// served at once and the others wait, as an inference server's scheduler would: in arrival order
// (fcfs, the default), or with --policy priority the way vLLM's `--scheduling-policy priority`
// does: lowest `priority` request field first (absent: 0), ties by arrival. Unlike vLLM it never
// preempts a request already in service.
// With either prefix flag, prompts are counted and cached the way vLLM's automatic prefix caching
// does, simply (bench/prefix-cache.ts): tokens are 4 characters of the prompt, blocks 16 tokens
// with chained ids, an LRU of N tokens' worth of blocks (0 or absent: nothing is cached). A
// request's cached tokens are its leading blocks present when it is admitted to service; its
// answer waits the latency plus U µs per uncached token, and carries usage.prompt_tokens and
// usage.prompt_tokens_details.cached_tokens. Simplifications: a request's blocks are in the cache
// from its admission (vLLM has them once its prefill ran, so requests admitted together all
// miss), blocks of requests in service can be evicted, a fully cached prompt recomputes nothing,
// and each request's prefill is charged on its own (no batching, no contention between them).
// POST /v1/embeddings is answered the same way, with one 384-dimension vector an input (an
// all-MiniLM-L6-v2's size: about 8 KB of JSON a line, what makes an embeddings line costlier to
// carry than a chat line); the vectors are drawn once at start and handed out in turn, so the
// upstream's own CPU per answer stays that of a chat answer.
// GET /stats answers how many requests it served, the most it held in service at once, and the
// latency (arrival to answer) per priority value, and with a prefix flag the prompt and cached
// tokens; GET /metrics answers vLLM's load gauges;
// GET /log the requests in the order they were started (admitted to service), each with its
// priority and its first message's content, so tests can see which work overtook which.
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import { embeddingOf } from './embedding-vectors.js';
import { serveOnLoopback } from './loopback-server.js';
import { BLOCK_TOKENS, PrefixCache, blockIds, promptText, promptTokens } from './prefix-cache.js';

const positional: string[] = [];
let policy = 'fcfs';
let prefixCacheTokens: string | undefined;
let prefillUsPerToken: string | undefined;
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i]!;
  if (arg === '--policy') policy = process.argv[++i] ?? '';
  else if (arg === '--prefix-cache-tokens') prefixCacheTokens = process.argv[++i] ?? '';
  else if (arg === '--prefill-us-per-token') prefillUsPerToken = process.argv[++i] ?? '';
  else positional.push(arg);
}
const refuse = (message: string): never => {
  process.stderr.write(`${message}\n`);
  process.exit(2);
};
if (policy !== 'fcfs' && policy !== 'priority') refuse(`--policy must be fcfs or priority, not ${JSON.stringify(policy)}`);
const nonNegative = (flag: string, value: string | undefined): number => {
  const number = Number(value ?? 0);
  return Number.isFinite(number) && number >= 0 && value !== '' ? number : refuse(`${flag} must be a number of at least 0, not ${JSON.stringify(value)}`);
};
const latencyMs = Number(positional[0] ?? 0);
const concurrency = Number(positional[1] ?? 64);
/** Prompts are modelled only when asked for: without the flags every answer is as it always was. */
const prompts =
  prefixCacheTokens === undefined && prefillUsPerToken === undefined
    ? undefined
    : {
        cache: new PrefixCache(nonNegative('--prefix-cache-tokens', prefixCacheTokens)),
        prefillUsPerToken: nonNegative('--prefill-us-per-token', prefillUsPerToken),
        promptTokens: 0,
        cachedTokens: 0,
      };

let active = 0;
let maxActive = 0;
let served = 0;
// Kept in service order: by priority, then arrival (fcfs: every priority counts as equal).
const waiting: Array<{ priority: number; seq: number; admit: () => void }> = [];
let arrivals = 0;
const latencies = new Map<number, number[]>();
/** Bounded so a long benchmark cannot grow it without end; tests read far fewer. */
const LOG_LIMIT = 100_000;
const started: Array<{ marker: string; priority: number }> = [];
// The time integral of requests in service, from the first request to the last answer: divided
// by that span, the mean number of requests the client kept in service.
let integral = 0;
let changedAt = 0;
let firstAt = 0;
/** The same integral per quarter second from the first request: the requests in service over time. */
const TIMELINE_MS = 250;
let timeline: number[] = [];
const track = (delta: number) => {
  const now = performance.now();
  if (firstAt === 0) firstAt = changedAt = now;
  integral += active * (now - changedAt);
  // Bucket by bucket, by index (a boundary computed in floating point could equal `from` forever).
  const last = Math.floor((now - firstAt) / TIMELINE_MS);
  for (let bucket = Math.floor((changedAt - firstAt) / TIMELINE_MS); bucket <= last; bucket++) {
    const from = Math.max(changedAt, firstAt + bucket * TIMELINE_MS);
    const to = Math.min(now, firstAt + (bucket + 1) * TIMELINE_MS);
    if (to > from) timeline[bucket] = (timeline[bucket] ?? 0) + active * (to - from);
  }
  changedAt = now;
  active += delta;
};

async function admit(priority: number): Promise<void> {
  if (active >= concurrency) {
    const entry = { priority: policy === 'priority' ? priority : 0, seq: arrivals++, admit: () => {} };
    const done = new Promise<void>((resolve) => (entry.admit = resolve));
    // Insert after every entry that goes first: equal priorities keep arrival order.
    let index = waiting.length;
    while (index > 0 && waiting[index - 1]!.priority > entry.priority) index--;
    waiting.splice(index, 0, entry);
    await done;
  } else track(1);
  maxActive = Math.max(maxActive, active);
}

function release(): void {
  const next = waiting.shift();
  if (next) next.admit();
  else track(-1);
}

/** A request body parsed once (bodies of the prefix benchmark are kilobytes), or why it could not be. */
type Parsed = { ok: true; request: unknown } | { ok: false; error: unknown };
function parse(body: string): Parsed {
  try {
    return { ok: true, request: JSON.parse(body) };
  } catch (error) {
    return { ok: false, error };
  }
}

/** vLLM's priority field: an integer, absent meaning 0; anything else is not a priority. */
function priorityOf(parsed: Parsed): number {
  const priority = parsed.ok ? (parsed.request as { priority?: unknown } | null)?.priority : undefined;
  return typeof priority === 'number' && Number.isInteger(priority) ? priority : 0;
}

/** The first message's content (a chat request's), at most 64 characters. */
function markerOf(parsed: Parsed): string {
  if (!parsed.ok) return '';
  try {
    return String((parsed.request as { messages?: Array<{ content?: unknown }> } | null)?.messages?.[0]?.content ?? '').slice(0, 64);
  } catch {
    return '';
  }
}

/** With prompts modelled: the request's approximate and cached prompt tokens, its blocks now cached. */
function admitPrompt(parsed: Parsed): { tokens: number; cached: number } | undefined {
  if (!prompts || !parsed.ok) return undefined;
  const text = promptText(parsed.request);
  const tokens = promptTokens(text);
  const cached = prompts.cache.admit(blockIds(text)) * BLOCK_TOKENS;
  prompts.promptTokens += tokens;
  prompts.cachedTokens += cached;
  return { tokens, cached };
}

function latencySummary(): Record<string, { count: number; meanMs: number; p50Ms: number; p95Ms: number; maxMs: number }> {
  const summary: Record<string, { count: number; meanMs: number; p50Ms: number; p95Ms: number; maxMs: number }> = {};
  for (const [priority, values] of latencies) {
    const sorted = [...values].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
    summary[String(priority)] = { count: sorted.length, meanMs: sorted.reduce((a, b) => a + b, 0) / sorted.length, p50Ms: at(0.5), p95Ms: at(0.95), maxMs: sorted[sorted.length - 1]! };
  }
  return summary;
}

function metrics(): string {
  const gauge = (name: string, help: string, value: number) =>
    `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name}{model_name="bench-model"} ${value}\n`;
  return (
    gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', active) +
    gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', waiting.length) +
    gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage (here: requests in service / slots).', active / concurrency)
  );
}

/** Vectors as the JSON text of their numbers, drawn once: an answer only splices them in. */
const VECTORS = Array.from({ length: 16 }, (_, index) => JSON.stringify(embeddingOf(`bench vector ${index}`)));

function embeddingsAnswer(parsed: Parsed): string {
  if (!parsed.ok) throw parsed.error;
  const request = parsed.request as { model?: string; input?: unknown };
  const inputs = Array.isArray(request.input) && typeof request.input[0] !== 'number' ? request.input : [request.input];
  served += 1;
  const data = inputs.map((_, index) => `{"object":"embedding","index":${index},"embedding":${VECTORS[(served + index) % VECTORS.length]}}`);
  const tokens = inputs.reduce<number>((sum, input) => sum + Math.max(1, promptTokens(String(input))), 0);
  return `{"object":"list","data":[${data.join(',')}],"model":${JSON.stringify(request.model ?? 'bench-model')},"usage":{"prompt_tokens":${tokens},"total_tokens":${tokens}}}`;
}

function answer(parsed: Parsed, prompt: { tokens: number; cached: number } | undefined): string {
  if (!parsed.ok) throw parsed.error;
  const request = parsed.request as { model?: string; messages?: Array<{ content?: unknown }> };
  const content = String(request.messages?.[0]?.content ?? '');
  served += 1;
  return JSON.stringify({
    id: `chatcmpl-${served}`,
    object: 'chat.completion',
    created: 1_700_000_000,
    model: request.model ?? 'bench-model',
    choices: [{ index: 0, message: { role: 'assistant', content: `echo: ${content.slice(0, 64)}` }, finish_reason: 'stop' }],
    usage: prompt
      ? { prompt_tokens: prompt.tokens, completion_tokens: 8, total_tokens: prompt.tokens + 8, prompt_tokens_details: { cached_tokens: prompt.cached } }
      : { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 },
  });
}

async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
  if (request.method === 'GET') {
    if (request.url === '/stats') {
      const meanActive = changedAt > firstAt ? integral / (changedAt - firstAt) : 0;
      const tokens = prompts ? { promptTokens: prompts.promptTokens, cachedTokens: prompts.cachedTokens } : {};
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ served, maxActive, meanActive, timeline: Array.from(timeline, (integral) => (integral ?? 0) / TIMELINE_MS), latencyByPriority: latencySummary(), ...tokens }));
      // Each /stats read starts a new measurement window (the cache itself stays warm).
      if (prompts) prompts.promptTokens = prompts.cachedTokens = 0;
      integral = 0;
      timeline = [];
      firstAt = 0;
      served = 0;
      maxActive = active;
      latencies.clear();
    }
    else if (request.url === '/log') response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ started }));
    else if (request.url === '/metrics') response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(metrics());
    else if (request.url === '/v1/models') response.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[]}');
    else response.writeHead(404).end();
    request.resume();
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const parsed = parse(Buffer.concat(chunks).toString());
  const priority = priorityOf(parsed);
  const arrivedAt = performance.now();
  await admit(priority);
  if (started.length < LOG_LIMIT) started.push({ marker: markerOf(parsed), priority });
  try {
    const prompt = admitPrompt(parsed);
    const waitMs = latencyMs + (prompt && prompts ? ((prompt.tokens - prompt.cached) * prompts.prefillUsPerToken) / 1000 : 0);
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    const text = request.url === '/v1/embeddings' ? embeddingsAnswer(parsed) : answer(parsed, prompt);
    response.writeHead(200, { 'content-type': 'application/json', 'x-request-id': `req_${served}` }).end(text);
    const values = latencies.get(priority) ?? [];
    values.push(performance.now() - arrivedAt);
    latencies.set(priority, values);
  } catch (error) {
    response.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: String(error), type: 'invalid_request_error', param: null, code: null } }));
  } finally {
    release();
  }
}

const server = createServer((request, response) => void handle(request, response));
serveOnLoopback(server);
