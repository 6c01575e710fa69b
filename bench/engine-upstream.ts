// The engine mode of the benchmarks' upstream (bench/upstream.ts), run as its own process:
//   node dist/bench/upstream.js --engine continuous [flags]   text generation on a
//     continuous-batching engine (test/support/engine-model/continuous-batching-engine.ts): POST /v1/chat/completions
//     and /v1/completions, streamed or whole (bench/generation-route.ts);
//   node dist/bench/upstream.js --engine embeddings [flags]   an embedding encoder run in batches
//     (test/support/engine-model/embedding-batch-engine.ts): POST /v1/embeddings (bench/embedding-route.ts).
// The flags and their defaults: bench/engine-flags.ts. Unlike the fixed-latency mode, latency
// grows with load and so does throughput, faster, until the batch or the KV cache is full.
// GET /metrics answers vLLM's gauges and counters, GET /stats the window since the last read
// (served, the most in the running batch at once, latency per priority, mean running, steps, steps/s,
// mean batch size a step, tokens), GET /log the requests in the order they first joined the batch.
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import { ContinuousBatchingEngine } from '../test/support/engine-model/continuous-batching-engine.js';
import { EmbeddingBatchEngine } from '../test/support/engine-model/embedding-batch-engine.js';
import { serveEmbeddings } from './embedding-route.js';
import { processClock } from '../test/support/engine-model/engine-clock.js';
import { type EngineOptions, engineOptions } from './engine-flags.js';
import { EngineStats, metricsText } from './engine-stats.js';
import { serveGeneration } from './generation-route.js';
import { serveOnLoopback } from './loopback-server.js';
import { errorBody } from './openai-bodies.js';

/** The model_name label of /metrics. */
const MODEL_NAME = 'bench-model';

let options: EngineOptions;
try {
  options = engineOptions(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`${(error as Error).message}\n`);
  process.exit(2);
}

const clock = processClock;
const generation = options.mode === 'continuous' ? new ContinuousBatchingEngine(options.config, clock) : undefined;
const embedding = options.mode === 'embeddings' ? new EmbeddingBatchEngine(options.config, clock) : undefined;
const engine = generation ?? embedding!;
const stats = new EngineStats(clock, () => engine.counters);
engine.onStep = (step) => stats.step(step);

async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const json = (status: number, body: string) => response.writeHead(status, { 'content-type': 'application/json' }).end(body);
  if (request.method === 'GET') {
    request.resume();
    if (request.url === '/stats') json(200, JSON.stringify({ engine: options.mode, ...stats.read() }));
    else if (request.url === '/log') json(200, JSON.stringify({ started: stats.started }));
    else if (request.url === '/metrics') response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(metricsText(MODEL_NAME, engine.load, engine.counters));
    else if (request.url === '/v1/models') json(200, JSON.stringify({ object: 'list', data: [{ id: MODEL_NAME, object: 'model', owned_by: 'bench' }] }));
    else response.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString());
  } catch (error) {
    return void json(400, errorBody(`the request body is not JSON: ${(error as Error).message}`));
  }
  const path = request.url?.split('?')[0];
  if (path === '/v1/chat/completions' || path === '/v1/completions') {
    if (generation) serveGeneration({ engine: generation, stats, clock, defaultMaxTokens: options.defaultMaxTokens }, path === '/v1/completions' ? 'completion' : 'chat', body, response);
    else json(400, errorBody('The model does not support the Completions API: this upstream runs an embedding model (--engine embeddings).'));
  } else if (path === '/v1/embeddings') {
    if (embedding) serveEmbeddings({ engine: embedding, stats, clock }, body, response);
    else json(400, errorBody('The model does not support the Embeddings API: this upstream runs a generative model (--engine continuous).'));
  } else response.writeHead(404).end();
}

serveOnLoopback(createServer((request, response) => void handle(request, response)));
