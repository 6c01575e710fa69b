// Real models (item 15): the built-in embedding model through a whole batch against onnxruntime
// called directly with the same inputs and batch size, and the time to first token of a stream
// through /compat/v1 against the engine directly.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { loadConfig } from '../src/config.js';
import { cachedMiniLmFiles, fetchMiniLmFiles, type MiniLmFiles } from '../src/engine/embeddings/minilm-files.js';
import { MAX_INPUT_TOKENS } from '../src/engine/embeddings/sentence-embedder.js';
import { packageRoot } from '../src/platform/package-root.js';
import { startNode, stop } from '../test/support/processes.js';
import { cpuSeconds, median, peakRssMiB } from './measurements.js';
import { BENCH_API_KEY, previousCommit, startSpool } from './spool.js';

export interface EmbeddingThroughput {
  readonly lines: number;
  /** Inputs per run of the model: the built-in model's most (MINILM_CONCURRENCY), and the baseline's batch size. */
  readonly batchSize: number;
  readonly directSentencesPerSecond: number;
  readonly spoolSentencesPerSecond: number;
  /** Median of the rounds' ratios. */
  readonly ratio: number;
  /** CPU of the bench process's direct runs and of the whole service, ms per sentence. */
  readonly directCpuMsPerSentence: number;
  readonly spoolCpuMsPerSentence: number;
  readonly spoolPeakRssMiB: number;
  /** The same batch through the previous build (BENCH_PREVIOUS_BUILD), in the same rounds. */
  readonly previous?: {
    readonly build: string;
    readonly spoolSentencesPerSecond: number;
    readonly ratio: number;
    readonly spoolCpuMsPerSentence: number;
    readonly spoolPeakRssMiB: number;
  };
}

export interface FirstToken {
  readonly requests: number;
  readonly direct: { readonly p50Ms: number; readonly p99Ms: number };
  readonly spool: { readonly p50Ms: number; readonly p99Ms: number };
}

export interface RealModelsResult {
  readonly rounds: number;
  readonly embeddings: EmbeddingThroughput;
  readonly firstToken: FirstToken;
}

const TOPICS = ['the weather', 'a football match', 'the stock market', 'a recipe for bread', 'a train journey', 'a new phone', 'an old castle', 'the election'];
const PHRASES = ['was discussed at length', 'surprised everyone', 'made the news again', 'is what people talked about', 'changed very little', 'will be decided tomorrow'];

/** Deterministic sentences of 8 to 30 words, as a corpus to embed would have. */
function sentences(count: number): string[] {
  return Array.from({ length: count }, (_, index) => {
    const extra = Array.from({ length: index % 17 }, (__, word) => ['and', 'then', 'the', 'people', 'in', 'town', 'said', 'so'][(index + word) % 8]).join(' ');
    return `Sentence ${index}: ${TOPICS[index % TOPICS.length]} ${PHRASES[(index >> 3) % PHRASES.length]}${extra ? `, ${extra}` : ''}.`;
  });
}

/** The baseline: onnxruntime and the model's tokenizer called directly, batches of `batchSize`, mean pooling and normalisation. */
async function directEmbedding(files: MiniLmFiles, texts: readonly string[], batchSize: number): Promise<{ seconds: number; cpuSeconds: number }> {
  const ort = (await import('onnxruntime-node')).default;
  const { Tokenizer } = await import('@huggingface/tokenizers');
  const tokenizer = new Tokenizer(JSON.parse(readFileSync(files.tokenizer, 'utf8')), { do_lower_case: true, tokenizer_class: 'BertTokenizer' });
  const session = await ort.InferenceSession.create(files.model, { executionProviders: ['cpu'], graphOptimizationLevel: 'all' });
  // One warm-up run, as the service's first request also pays for its session's first run.
  const run = async (part: readonly string[]) => {
    const ids: number[][] = part.map((text): number[] => {
      const encoded = tokenizer.encode(text).ids;
      return encoded.length <= MAX_INPUT_TOKENS ? encoded : [...encoded.slice(0, MAX_INPUT_TOKENS - 1), encoded.at(-1)!];
    });
    const length = Math.max(...ids.map((row) => row.length));
    const input = new BigInt64Array(part.length * length);
    const mask = new BigInt64Array(part.length * length);
    ids.forEach((row, r) => row.forEach((id, c) => ((input[r * length + c] = BigInt(id)), (mask[r * length + c] = 1n))));
    const shape = [part.length, length];
    const output = (await session.run({ input_ids: new ort.Tensor('int64', input, shape), attention_mask: new ort.Tensor('int64', mask, shape), token_type_ids: new ort.Tensor('int64', new BigInt64Array(part.length * length), shape) })).last_hidden_state!;
    const hidden = output.data as Float32Array;
    const width = output.dims[2]!;
    for (let r = 0; r < part.length; r++) {
      const vector = new Float32Array(width);
      for (let c = 0; c < ids[r]!.length; c++) for (let h = 0; h < width; h++) vector[h]! += hidden[(r * length + c) * width + h]!;
      let norm = 0;
      for (let h = 0; h < width; h++) norm += vector[h]! * vector[h]!;
      norm = Math.sqrt(norm);
      for (let h = 0; h < width; h++) vector[h]! /= norm;
    }
  };
  await run(texts.slice(0, batchSize));
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  for (let at = 0; at < texts.length; at += batchSize) await run(texts.slice(at, at + batchSize));
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  await session.release();
  return { seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

/** A batch of `texts` on job-embeddings through a fresh service (of `build`, a checkout's root, where given): upload to output downloaded. */
async function spoolEmbedding(texts: readonly string[], work: string, modelsDir: string, build?: string): Promise<{ seconds: number; cpuSeconds: number; peakRssMiB: number }> {
  // Both builds read the model from the same folder: the same files, fetched once.
  const service = await startSpool(mkdtempSync(join(work, 'data-')), { MODELS_DIR: modelsDir }, build);
  try {
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const lines = texts.map((input, index) => JSON.stringify({ custom_id: `s-${index}`, method: 'POST', url: '/v1/embeddings', body: { model: 'all-minilm-l6-v2', input } }));
    const body = Buffer.from(`${lines.join('\n')}\n`);
    // The model loads on its first request: one request first, as the baseline's warm-up run.
    const warm = await fetch(`${service.url}/compat/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${BENCH_API_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'all-minilm-l6-v2', input: texts[0] }) });
    if (warm.status !== 200) throw new Error(`the embedding model answered ${warm.status}: ${await warm.text()}`);
    const cpuBefore = cpuSeconds(service.child.pid!);
    const started = performance.now();
    const file = await client.files.create({ file: await toFile(body, 'sentences.jsonl'), purpose: 'batch' });
    let batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/embeddings', completion_window: 'unlimited', job_id: 'job-embeddings' } as unknown as Parameters<OpenAI['batches']['create']>[0]);
    while (!['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      batch = await client.batches.retrieve(batch.id);
    }
    if (batch.status !== 'completed' || batch.request_counts?.completed !== texts.length) throw new Error(`the embeddings batch ended ${batch.status} with ${JSON.stringify(batch.request_counts)}`);
    const output = await (await client.files.content(batch.output_file_id!)).text();
    const seconds = (performance.now() - started) / 1000;
    const ids = new Set(output.split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { custom_id: string }).custom_id));
    if (ids.size !== texts.length) throw new Error(`the output holds ${ids.size} of ${texts.length} lines`);
    return { seconds, cpuSeconds: cpuSeconds(service.child.pid!) - cpuBefore, peakRssMiB: peakRssMiB(service.child.pid!) };
  } finally {
    await stop(service.child);
  }
}

/** Milliseconds from sending a streamed chat request to its first piece of text. */
async function firstTokenMs(url: string, headers: Record<string, string>, body: unknown): Promise<number> {
  const started = performance.now();
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  if (response.status !== 200 || !response.body) throw new Error(`${url} answered ${response.status}`);
  const decoder = new TextDecoder();
  let text = '';
  let at: number | undefined;
  for await (const piece of response.body) {
    text += decoder.decode(piece as Uint8Array, { stream: true });
    if (at === undefined && /"content":"[^"]/.test(text)) at = performance.now() - started;
  }
  if (at === undefined) throw new Error(`${url} streamed no text`);
  return at;
}

const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;

/** The engine's time to first token directly and through /compat/v1, requests one after another, alternated. */
async function firstToken(requests: number, work: string): Promise<FirstToken> {
  const engine = await startNode(join(packageRoot, 'dist/bench/upstream.js'), ['--engine', 'continuous'], {}, /listening on (\d+)/);
  const engineUrl = `http://127.0.0.1:${engine.match[1]}`;
  const fleetFile = join(work, 'fleet.json');
  writeFileSync(fleetFile, JSON.stringify({ models: { m: { replicas: [{ kind: 'vllm', base_url: `${engineUrl}/v1` }] } } }));
  const service = await startSpool(mkdtempSync(join(work, 'data-')), { FLEET_FILE: fleetFile });
  try {
    const body = (index: number) => ({ model: 'm', messages: [{ role: 'user', content: `Tell me about request ${index}.` }], max_tokens: 8, stream: true });
    const direct: number[] = [];
    const spool: number[] = [];
    const spoolUrl = `${service.url}/compat/v1/chat/completions`;
    const auth = { authorization: `Bearer ${BENCH_API_KEY}` };
    for (let index = 0; index < 10; index++) await Promise.all([firstTokenMs(`${engineUrl}/v1/chat/completions`, {}, body(index)), firstTokenMs(spoolUrl, auth, body(index))]);
    for (let index = 0; index < requests; index++) {
      // Alternated, one at a time: each side sees the same engine, idle but for it.
      direct.push(await firstTokenMs(`${engineUrl}/v1/chat/completions`, {}, body(index)));
      spool.push(await firstTokenMs(spoolUrl, auth, body(index)));
    }
    return { requests, direct: { p50Ms: median(direct), p99Ms: quantile(direct, 0.99) }, spool: { p50Ms: median(spool), p99Ms: quantile(spool, 0.99) } };
  } finally {
    await stop(service.child);
    await stop(engine.child);
  }
}

export async function benchRealModels(options: { rounds: number; lines: number; requests: number; previous?: string }): Promise<RealModelsResult> {
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-models-'));
  try {
    const modelsDir = loadConfig({}).models.dir;
    const files = cachedMiniLmFiles(modelsDir) ?? (await fetchMiniLmFiles(modelsDir));
    const texts = sentences(options.lines);
    const batchSize = 64;
    type SpoolRun = Awaited<ReturnType<typeof spoolEmbedding>>;
    const rounds: Array<{ direct: Awaited<ReturnType<typeof directEmbedding>>; spool: SpoolRun; previous?: SpoolRun }> = [];
    for (let round = 0; round < options.rounds; round++) {
      const direct = await directEmbedding(files, texts, batchSize);
      const spool = await spoolEmbedding(texts, work, modelsDir);
      const previous = options.previous ? await spoolEmbedding(texts, work, modelsDir, options.previous) : undefined;
      const rate = (run: SpoolRun) => (texts.length / run.seconds).toFixed(0);
      process.stdout.write(`real-models round ${round + 1}: direct ${(texts.length / direct.seconds).toFixed(0)}/s, spool ${rate(spool)}/s${previous ? `, previous build ${rate(previous)}/s` : ''}\n`);
      rounds.push({ direct, spool, ...(previous ? { previous } : {}) });
    }
    const previousRuns = rounds.flatMap((round) => (round.previous ? [{ direct: round.direct, spool: round.previous }] : []));
    const embeddings: EmbeddingThroughput = {
      lines: options.lines,
      batchSize,
      directSentencesPerSecond: median(rounds.map((round) => options.lines / round.direct.seconds)),
      spoolSentencesPerSecond: median(rounds.map((round) => options.lines / round.spool.seconds)),
      ratio: median(rounds.map((round) => round.direct.seconds / round.spool.seconds)),
      directCpuMsPerSentence: median(rounds.map((round) => (round.direct.cpuSeconds * 1000) / options.lines)),
      spoolCpuMsPerSentence: median(rounds.map((round) => (round.spool.cpuSeconds * 1000) / options.lines)),
      spoolPeakRssMiB: median(rounds.map((round) => round.spool.peakRssMiB)),
      ...(options.previous && previousRuns.length > 0
        ? {
            previous: {
              build: previousCommit(options.previous),
              spoolSentencesPerSecond: median(previousRuns.map((run) => options.lines / run.spool.seconds)),
              ratio: median(previousRuns.map((run) => run.direct.seconds / run.spool.seconds)),
              spoolCpuMsPerSentence: median(previousRuns.map((run) => (run.spool.cpuSeconds * 1000) / options.lines)),
              spoolPeakRssMiB: median(previousRuns.map((run) => run.spool.peakRssMiB)),
            },
          }
        : {}),
    };
    return { rounds: options.rounds, embeddings, firstToken: await firstToken(options.requests, work) };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
