// A local OpenAI-compatible upstream for the batch benchmarks, run as its own process:
//   node dist/bench/upstream.js LATENCY_MS CONCURRENCY
// Each chat completion is answered after a fixed latency; at most CONCURRENCY requests are
// served at once and the others wait in arrival order, as an inference server's scheduler would.
// GET /stats answers how many requests it served and the most it held in service at once.
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';

const latencyMs = Number(process.argv[2] ?? 0);
const concurrency = Number(process.argv[3] ?? 64);

let active = 0;
let maxActive = 0;
let served = 0;
const waiting: Array<() => void> = [];
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

async function admit(): Promise<void> {
  if (active >= concurrency) await new Promise<void>((resolve) => waiting.push(resolve));
  else track(1);
  maxActive = Math.max(maxActive, active);
}

function release(): void {
  const next = waiting.shift();
  if (next) next();
  else track(-1);
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
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ served, maxActive, meanActive }));
      // Each /stats read starts a new measurement window.
      integral = 0;
      firstAt = 0;
      served = 0;
      maxActive = active;
    }
    else if (request.url === '/v1/models') response.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[]}');
    else response.writeHead(404).end();
    request.resume();
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  await admit();
  try {
    if (latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, latencyMs));
    const text = answer(Buffer.concat(chunks).toString());
    response.writeHead(200, { 'content-type': 'application/json', 'x-request-id': `req_${served}` }).end(text);
  } catch (error) {
    response.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: String(error), type: 'invalid_request_error', param: null, code: null } }));
  } finally {
    release();
  }
}

const server = createServer((request, response) => void handle(request, response));
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening on ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
