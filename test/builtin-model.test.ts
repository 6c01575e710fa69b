import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BuiltinEngine } from '../src/engine/builtin/builtin-engine.js';
import { CheckpointError, createCheckpoint, loadCheckpoint } from '../src/engine/builtin/checkpoint.js';
import { MAX_HEADER_BYTES, SafetensorsError, parseFile, serialize } from '../src/engine/builtin/safetensors.js';
import { Transformer } from '../src/engine/builtin/transformer.js';
import { tempDir } from './support/service.js';

const f32 = (values: number[]) => new Uint8Array(new Float32Array(values).buffer);
const header = (json: unknown, data = new Uint8Array(0)) => {
  const text = Buffer.from(JSON.stringify(json));
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(text.length));
  return Buffer.concat([prefix, text, data]);
};

describe('safetensors parsing refuses every malformed file with a clear error', () => {
  it('round-trips a written file', () => {
    const bytes = serialize([
      { name: 'a', dtype: 'F32', shape: [2], data: f32([1, 2]) },
      { name: 'b', dtype: 'I8', shape: [3], data: new Uint8Array([1, 2, 3]) },
    ], { format: 'pt' });
    const parsed = parseFile(bytes);
    expect(parsed.metadata).toEqual({ format: 'pt' });
    expect(parsed.tensors.map((tensor) => [tensor.name, tensor.dtype, tensor.shape, tensor.begin, tensor.end])).toEqual([
      ['a', 'F32', [2], 0, 8],
      ['b', 'I8', [3], 8, 11],
    ]);
    expect((8 + bytes.readUInt32LE(0)) % 8).toBe(0);
  });

  const cases: Array<[string, Buffer, RegExp]> = [
    ['a header larger than the limit', (() => { const b = Buffer.alloc(16); b.writeBigUInt64LE(BigInt(MAX_HEADER_BYTES + 1)); return b; })(), /more than the 104857600-byte limit/],
    ['a file shorter than the 8-byte prefix', Buffer.from([1, 2, 3]), /truncated: 3 bytes/],
    ['a header longer than the file', (() => { const b = Buffer.alloc(20); b.writeBigUInt64LE(100n); return b; })(), /truncated: the header needs 108 bytes/],
    ['a header that is not JSON', Buffer.concat([(() => { const b = Buffer.alloc(8); b.writeBigUInt64LE(5n); return b; })(), Buffer.from('{nope')]), /not valid UTF-8 JSON/],
    ['an unknown dtype', header({ a: { dtype: 'F33', shape: [1], data_offsets: [0, 4] } }, f32([1])), /unknown dtype "F33"/],
    ['offsets out of order', header({ a: { dtype: 'F32', shape: [1], data_offsets: [4, 0] } }, f32([1])), /invalid data_offsets/],
    ['overlapping tensors', header({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, f32([1, 2])), /overlaps/],
    ['a gap between tensors', header({ a: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, f32([1, 2])), /gap of 4 bytes/],
    ['a size that does not match shape × dtype', header({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, f32([1, 2])), /spans 8 bytes but its shape \[3\] of F32 needs 12/],
    ['a truncated data section', header({ a: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, f32([1, 2])), /truncated: the tensors need/],
    ['bytes after the last tensor', header({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }, f32([1, 2])), /4 bytes follow the last tensor/],
    ['a non-string __metadata__ value', header({ __metadata__: { n: 1 } }), /__metadata__.n is not a string/],
  ];
  for (const [name, bytes, message] of cases) {
    it(name, () => {
      expect(() => parseFile(bytes, 'test.safetensors')).toThrow(SafetensorsError);
      expect(() => parseFile(bytes, 'test.safetensors')).toThrow(message);
    });
  }

  it('refuses a checkpoint whose tensors do not fit its config', () => {
    const directory = tempDir('ckpt-bad');
    createCheckpoint(directory, { seed: 1, layers: 1, hidden: 16, dtype: 'f32' });
    const config = JSON.parse(readFileSync(join(directory, 'config.json'), 'utf8'));
    writeFileSync(join(directory, 'config.json'), JSON.stringify({ ...config, hidden_size: 32, intermediate_size: 128, num_attention_heads: 2 }));
    expect(() => loadCheckpoint(directory)).toThrow(CheckpointError);
    expect(() => loadCheckpoint(directory)).toThrow(/has shape \[258, 16\], the config needs \[258, 32\]/);
  });
});

describe('checkpoints generated from a seed', () => {
  const make = (label: string, options: Parameters<typeof createCheckpoint>[1]) => {
    const directory = tempDir(label);
    createCheckpoint(directory, options);
    return directory;
  };
  const engineFor = (directory: string) => new BuiltinEngine(new Transformer(loadCheckpoint(directory)), 'spool-tiny');
  const chat = (engine: BuiltinEngine, body: Record<string, unknown> = {}) =>
    engine.infer({ endpoint: '/v1/chat/completions', body: { messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 12, ...body } });

  it('are byte for byte the same for the same options, and differ by seed, size and quantization', async () => {
    const a = make('ck-a', { seed: 1, layers: 2, hidden: 32, dtype: 'f32' });
    const again = make('ck-a2', { seed: 1, layers: 2, hidden: 32, dtype: 'f32' });
    const b = make('ck-b', { seed: 2, layers: 2, hidden: 32, dtype: 'f32' });
    expect(readFileSync(join(a, 'model.safetensors')).equals(readFileSync(join(again, 'model.safetensors')))).toBe(true);
    expect(readFileSync(join(a, 'config.json'), 'utf8')).toBe(readFileSync(join(b, 'config.json'), 'utf8'));
    expect(readFileSync(join(a, 'model.safetensors')).equals(readFileSync(join(b, 'model.safetensors')))).toBe(false);

    const answerA = ((await chat(engineFor(a), { temperature: 0 })).body as any).choices[0].message.content;
    const answerA2 = ((await chat(engineFor(again), { temperature: 0 })).body as any).choices[0].message.content;
    const answerB = ((await chat(engineFor(b), { temperature: 0 })).body as any).choices[0].message.content;
    expect(answerA).toBe(answerA2);
    expect(answerA).not.toBe(answerB);

    const wider = JSON.parse(readFileSync(join(make('ck-w', { seed: 1, layers: 3, hidden: 48, dtype: 'f32' }), 'config.json'), 'utf8'));
    expect([wider.num_hidden_layers, wider.hidden_size]).toEqual([3, 48]);
    const quantized = make('ck-q', { seed: 1, layers: 2, hidden: 32, dtype: 'f32', quantize: 'int8' });
    const qconfig = JSON.parse(readFileSync(join(quantized, 'config.json'), 'utf8'));
    expect(qconfig.quantization_config).toMatchObject({ quant_method: 'spool-int8', bits: 8 });
    const names = parseFile(readFileSync(join(quantized, 'model.safetensors'))).tensors.map((tensor) => tensor.name);
    expect(names).toContain('model.layers.0.self_attn.q_proj.qweight');
    expect(names).toContain('model.layers.0.self_attn.q_proj.weight_scale');
    expect(((await chat(engineFor(quantized))).body as any).choices[0].message.content).toEqual(expect.any(String));
    const bf16 = make('ck-bf', { seed: 1, layers: 2, hidden: 32, dtype: 'bf16', shards: 3 });
    expect(loadCheckpoint(bf16).config.torch_dtype).toBe('bfloat16');
    expect(((await chat(engineFor(bf16))).body as any).choices[0].message.content).toEqual(expect.any(String));
  });
});

describe('the built-in engine', () => {
  const directory = tempDir('ck-engine');
  createCheckpoint(directory, { seed: 7, layers: 2, hidden: 32, dtype: 'f32' });
  const engine = new BuiltinEngine(new Transformer(loadCheckpoint(directory)), 'spool-tiny');
  const complete = async (body: Record<string, unknown>) => (await engine.infer({ endpoint: '/v1/completions', body: { prompt: 'abc', ...body } })).body as any;

  it('gives the same output for the same weights, request and seed, and another for another seed', async () => {
    const first = await complete({ max_tokens: 20, temperature: 1, seed: 42 });
    const second = await complete({ max_tokens: 20, temperature: 1, seed: 42 });
    const other = await complete({ max_tokens: 20, temperature: 1, seed: 43 });
    expect(first.choices[0].text).toBe(second.choices[0].text);
    expect(first.choices[0].text).not.toBe(other.choices[0].text);
  });

  it('prints valid, printable UTF-8 in 1,000 answers, whatever the seed, temperature and length', async () => {
    const decoder = new TextDecoder('utf-8', { fatal: true });
    let characters = 0;
    for (let index = 0; index < 1000; index++) {
      const body = await complete({ prompt: `prompt ${index}`, max_tokens: 1 + (index % 12), temperature: (index % 5) * 0.5, seed: index });
      const text: string = body.choices[0].text;
      // Whole characters only: the bytes decode strictly, and nothing is a replacement character.
      expect(decoder.decode(Buffer.from(text, 'utf8'))).toBe(text);
      expect(text, JSON.stringify(text)).not.toMatch(/\uFFFD/);
      // No control, format, surrogate, private-use or unassigned code point but tab and newline.
      expect(text.replace(/[\t\n]/g, ''), JSON.stringify(text)).not.toMatch(/\p{C}/u);
      // A multi-byte character counts each of its bytes as a token: never more than max_tokens.
      expect(body.usage.completion_tokens).toBeLessThanOrEqual(1 + (index % 12));
      characters += [...text].length;
    }
    expect(characters).toBeGreaterThan(1000);
  });

  it('counts real tokens: one per byte plus BOS, and stops at max_tokens', async () => {
    const answer = await complete({ prompt: 'héllo', max_tokens: 5, temperature: 0 });
    expect(answer.usage.prompt_tokens).toBe(1 + Buffer.byteLength('héllo'));
    expect(answer.usage.completion_tokens).toBeLessThanOrEqual(5);
    expect(answer.usage.total_tokens).toBe(answer.usage.prompt_tokens + answer.usage.completion_tokens);
    if (answer.choices[0].finish_reason === 'length') expect(answer.usage.completion_tokens).toBe(5);
  });

  it('cuts the text at a stop sequence', async () => {
    const free = (await complete({ max_tokens: 40, temperature: 0 })).choices[0].text as string;
    const stop = free.slice(3, 5);
    const stopped = await complete({ max_tokens: 40, temperature: 0, stop });
    expect(stopped.choices[0].text).toBe(free.slice(0, free.indexOf(stop)));
    expect(stopped.choices[0].finish_reason).toBe('stop');
  });

  it('embeds as unit vectors of the hidden size, in float or base64', async () => {
    const answer = (await engine.infer({ endpoint: '/v1/embeddings', body: { input: ['one', 'two'] } })).body as any;
    expect(answer.data).toHaveLength(2);
    for (const item of answer.data) {
      expect(item.embedding).toHaveLength(32);
      expect(Math.hypot(...item.embedding)).toBeCloseTo(1, 5);
    }
    const encoded = (await engine.infer({ endpoint: '/v1/embeddings', body: { input: 'one', encoding_format: 'base64' } })).body as any;
    const decoded = Array.from(new Float32Array(new Uint8Array(Buffer.from(encoded.data[0].embedding, 'base64')).buffer));
    expect(decoded).toEqual(answer.data[0].embedding);
    expect(answer.usage).toEqual({ prompt_tokens: 8, total_tokens: 8 });
  });

  it('answers a bad request with an OpenAI 400', async () => {
    const answer = await engine.infer({ endpoint: '/v1/chat/completions', body: { messages: 'hi' } });
    expect(answer.statusCode).toBe(400);
    expect(answer.body).toMatchObject({ error: { param: 'messages', type: 'invalid_request_error' } });
    const long = await engine.infer({ endpoint: '/v1/completions', body: { prompt: 'x'.repeat(600) } });
    expect(long.body).toMatchObject({ error: { code: 'context_length_exceeded' } });
  });
});
