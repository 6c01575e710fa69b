// A local OpenAI-compatible upstream for the batch benchmarks, run as its own process:
//   node dist/bench/upstream.js LATENCY_MS CONCURRENCY [--policy fcfs|priority]
// Each chat completion is answered after a fixed latency; at most CONCURRENCY requests are
// served at once and the others wait, as an inference server's scheduler would: in arrival order
// (fcfs, the default), or with --policy priority the way vLLM's `--scheduling-policy priority`
// does: lowest `priority` request field first (absent: 0), ties by arrival. Unlike vLLM it never
// preempts a request already in service.
// GET /stats answers how many requests it served, the most it held in service at once, and the
// latency (arrival to answer) per priority value; GET /metrics answers vLLM's load gauges;
// GET /log the requests in the order they were started (admitted to service), each with its
// priority and its first message's content, so tests can see which work overtook which.
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import { serveOnLoopback } from './loopback-server.js';

const positional: string[] = [];
let policy = 'fcfs';
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i]!;
  if (arg === '--policy') policy = process.argv[++i] ?? '';
  else positional.push(arg);
}
if (policy !== 'fcfs' && policy !== 'priority') {
  process.stderr.write(`--policy must be fcfs or priority, not ${JSON.stringify(policy)}\n`);
  process.exit(2);
}
const latencyMs = Number(positional[0] ?? 0);
const concurrency = Number(positional[1] ?? 64);

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
const track = (delta: number) => {
  const now = performance.now();
  if (firstAt === 0) firstAt = changedAt = now;
  integral += active * (now - changedAt);
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

/** vLLM's priority field: an integer, absent meaning 0; anything else is not a priority. */
function priorityOf(body: string): number {
  try {
    const priority = (JSON.parse(body) as { priority?: unknown }).priority;
    return typeof priority === 'number' && Number.isInteger(priority) ? priority : 0;
  } catch {
    return 0;
  }
}

/** The first message's content (a chat request's), at most 64 characters. */
function markerOf(body: string): string {
  try {
    return String((JSON.parse(body) as { messages?: Array<{ content?: unknown }> }).messages?.[0]?.content ?? '').slice(0, 64);
  } catch {
    return '';
  }
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

function answer(body: string): string {
  const request = JSON.parse(body) as { model?: string; messages?: Array<{ content?: unknown }> };
  const content = String(request.messages?.[0]?.content ?? '');
  served += 1;
  return JSON.stringify({
    id: `chatcmpl-${served}`,
    object: 'chat.completion',
    created: 1_700_000_000,
    model: request.model ?? 'bench-model',
    choices: [{ index: 0, message: { role: 'assistant', content: `echo: ${content.slice(0, 64)}` }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 },
  });
}

async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
  if (request.method === 'GET') {
    if (request.url === '/stats') {
      const meanActive = changedAt > firstAt ? integral / (changedAt - firstAt) : 0;
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ served, maxActive, meanActive, latencyByPriority: latencySummary() }));
      // Each /stats read starts a new measurement window.
      integral = 0;
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
  const body = Buffer.concat(chunks).toString();
  const priority = priorityOf(body);
  const arrivedAt = performance.now();
  await admit(priority);
  if (started.length < LOG_LIMIT) started.push({ marker: markerOf(body), priority });
  try {
    if (latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, latencyMs));
    const text = answer(body);
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
