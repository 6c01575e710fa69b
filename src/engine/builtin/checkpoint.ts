import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CheckpointManifest } from '../../domain/checkpoint-compatibility.js';
import { type Dtype, SafetensorsError, type TensorToWrite, float32ToBf16, parseFile, serialize, toFloat32 } from './safetensors.js';

export const ARCHITECTURE = 'SpoolForCausalLM';
export const MODEL_TYPE = 'spool';
export const BOS = 256;
export const EOS = 257;
export const VOCAB_SIZE = 258;
export const INT8_QUANT_METHOD = 'spool-int8';

/** config.json of a Hugging Face-style checkpoint folder, as the built-in engine reads it. */
export interface ModelConfig {
  readonly architectures: readonly string[];
  readonly model_type: string;
  readonly vocab_size: number;
  readonly hidden_size: number;
  readonly intermediate_size: number;
  readonly num_hidden_layers: number;
  readonly num_attention_heads: number;
  readonly max_position_embeddings: number;
  readonly rms_norm_eps: number;
  readonly rope_theta: number;
  readonly bos_token_id: number;
  readonly eos_token_id: number;
  readonly torch_dtype: 'float32' | 'bfloat16';
  readonly quantization_config?: { readonly quant_method: string; readonly bits: number; readonly scheme: string; readonly weight_only: boolean };
}

export class CheckpointError extends Error {
  override readonly name = 'CheckpointError';
}

const LINEAR = ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj', 'self_attn.o_proj', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'];

/** Every tensor the architecture has, with its shape; linear layers by their weight name. */
export function expectedTensors(config: ModelConfig): Map<string, { shape: number[]; linear: boolean }> {
  const h = config.hidden_size;
  const i = config.intermediate_size;
  const tensors = new Map<string, { shape: number[]; linear: boolean }>();
  tensors.set('model.embed_tokens.weight', { shape: [config.vocab_size, h], linear: false });
  for (let layer = 0; layer < config.num_hidden_layers; layer++) {
    const prefix = `model.layers.${layer}`;
    tensors.set(`${prefix}.input_layernorm.weight`, { shape: [h], linear: false });
    tensors.set(`${prefix}.post_attention_layernorm.weight`, { shape: [h], linear: false });
    for (const name of LINEAR) {
      const shape = name === 'mlp.gate_proj' || name === 'mlp.up_proj' ? [i, h] : name === 'mlp.down_proj' ? [h, i] : [h, h];
      tensors.set(`${prefix}.${name}.weight`, { shape, linear: true });
    }
  }
  tensors.set('model.norm.weight', { shape: [h], linear: false });
  tensors.set('lm_head.weight', { shape: [config.vocab_size, h], linear: true });
  return tensors;
}

export function checkConfig(raw: unknown, source: string): ModelConfig {
  const config = raw as ModelConfig;
  const problems: string[] = [];
  if (!Array.isArray(config?.architectures) || !config.architectures.includes(ARCHITECTURE)) problems.push(`architectures must include ${ARCHITECTURE}`);
  if (config?.model_type !== MODEL_TYPE) problems.push(`model_type must be ${MODEL_TYPE}`);
  for (const key of ['vocab_size', 'hidden_size', 'intermediate_size', 'num_hidden_layers', 'num_attention_heads', 'max_position_embeddings'] as const) {
    if (!Number.isSafeInteger(config?.[key]) || config[key] < 1) problems.push(`${key} must be a positive integer`);
  }
  if (config?.vocab_size !== VOCAB_SIZE) problems.push(`vocab_size must be ${VOCAB_SIZE} (256 bytes, BOS, EOS)`);
  if (config?.hidden_size % config?.num_attention_heads !== 0 || (config.hidden_size / config.num_attention_heads) % 2 !== 0) {
    problems.push('hidden_size must split into num_attention_heads heads of even size');
  }
  if (config?.quantization_config && config.quantization_config.quant_method !== INT8_QUANT_METHOD) {
    problems.push(`quantization_config.quant_method ${JSON.stringify(config.quantization_config.quant_method)} is not supported (only ${INT8_QUANT_METHOD})`);
  }
  if (problems.length > 0) throw new CheckpointError(`${source}: ${problems.join('; ')}`);
  return config;
}

export interface LoadedWeights {
  readonly config: ModelConfig;
  /** The checkpoint as stored (names, dtypes, shapes): what weight sync compares against. */
  readonly manifest: CheckpointManifest;
  /** Every tensor as float32; int8 linear layers are dequantized (weight × per-row scale). */
  readonly tensors: ReadonlyMap<string, Float32Array>;
}

/** Loads config.json and model.safetensors, or the shards named by model.safetensors.index.json. */
export function loadCheckpoint(directory: string): LoadedWeights {
  const configPath = join(directory, 'config.json');
  if (!existsSync(configPath)) throw new CheckpointError(`${directory}: no config.json`);
  const config = checkConfig(JSON.parse(readFileSync(configPath, 'utf8')), configPath);
  const indexPath = join(directory, 'model.safetensors.index.json');
  const shards = existsSync(indexPath)
    ? [...new Set(Object.values((JSON.parse(readFileSync(indexPath, 'utf8')) as { weight_map: Record<string, string> }).weight_map))]
    : ['model.safetensors'];

  const raw = new Map<string, { dtype: Dtype; shape: readonly number[]; values: Float32Array }>();
  const stored: Record<string, { dtype: string; shape: readonly number[] }> = {};
  for (const shard of shards) {
    if (shard.includes('/') || shard.includes('\\')) throw new CheckpointError(`${indexPath}: shard name ${JSON.stringify(shard)} is not a plain file name`);
    const path = join(directory, shard);
    const bytes = readFileSync(path);
    const header = parseFile(bytes, path);
    for (const tensor of header.tensors) {
      const data = bytes.subarray(header.dataStart + tensor.begin, header.dataStart + tensor.end);
      raw.set(tensor.name, { dtype: tensor.dtype, shape: tensor.shape, values: toFloat32(data, tensor.dtype, `${path}: ${tensor.name}`) });
      stored[tensor.name] = { dtype: tensor.dtype, shape: tensor.shape };
    }
  }

  const quantized = config.quantization_config?.quant_method === INT8_QUANT_METHOD;
  const tensors = new Map<string, Float32Array>();
  for (const [name, expected] of expectedTensors(config)) {
    if (quantized && expected.linear) {
      const base = name.replace(/\.weight$/, '');
      const q = raw.get(`${base}.qweight`);
      const scale = raw.get(`${base}.weight_scale`);
      if (!q || !scale) throw new CheckpointError(`${directory}: quantized tensor ${base}.qweight or ${base}.weight_scale is missing`);
      if (q.dtype !== 'I8') throw new CheckpointError(`${directory}: ${base}.qweight is ${q.dtype}, expected I8`);
      checkShape(directory, `${base}.qweight`, q.shape, expected.shape);
      checkShape(directory, `${base}.weight_scale`, scale.shape, [expected.shape[0]!]);
      const columns = expected.shape[1]!;
      const values = new Float32Array(q.values.length);
      for (let row = 0; row < expected.shape[0]!; row++) {
        const factor = scale.values[row]!;
        for (let column = 0; column < columns; column++) values[row * columns + column] = q.values[row * columns + column]! * factor;
      }
      tensors.set(name, values);
      continue;
    }
    const tensor = raw.get(name);
    if (!tensor) throw new CheckpointError(`${directory}: tensor ${name} is missing`);
    checkShape(directory, name, tensor.shape, expected.shape);
    tensors.set(name, tensor.values);
  }
  const manifest: CheckpointManifest = {
    architectures: config.architectures,
    model_type: config.model_type,
    quantization_config: config.quantization_config ?? null,
    tensors: stored,
  };
  return { config, manifest, tensors };
}

function checkShape(directory: string, name: string, actual: readonly number[], expected: readonly number[]): void {
  if (actual.length !== expected.length || actual.some((dim, index) => dim !== expected[index])) {
    throw new CheckpointError(`${directory}: tensor ${name} has shape [${actual.join(', ')}], the config needs [${expected.join(', ')}]`);
  }
}

export interface CheckpointOptions {
  readonly seed: number;
  readonly layers: number;
  readonly hidden: number;
  readonly heads?: number;
  readonly dtype: 'f32' | 'bf16';
  readonly quantize?: 'int8';
  /** How many safetensors files to split the weights into (an index file is written when > 1). */
  readonly shards?: number;
  readonly maxPositions?: number;
}

export const DEFAULT_CHECKPOINT: CheckpointOptions = { seed: 0, layers: 2, hidden: 64, dtype: 'f32' };

/** A deterministic random-number stream (mulberry32) and normal samples from it (Box-Muller). */
function randomNormals(seed: number): () => number {
  let state = seed >>> 0;
  const uniform = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(uniform() || Number.MIN_VALUE)) * Math.cos(2 * Math.PI * uniform());
}

/**
 * Writes a checkpoint folder generated from a seed: the same options give the same bytes. Two
 * seeds give the same architecture with other weights; other layers or hidden sizes another
 * architecture; --quantize int8 another quantization.
 */
export function createCheckpoint(directory: string, options: CheckpointOptions, modes: { directory?: number; file?: number } = {}): ModelConfig {
  const heads = options.heads ?? Math.max(1, Math.floor(options.hidden / 16));
  const config: ModelConfig = {
    architectures: [ARCHITECTURE],
    model_type: MODEL_TYPE,
    vocab_size: VOCAB_SIZE,
    hidden_size: options.hidden,
    intermediate_size: options.hidden * 4,
    num_hidden_layers: options.layers,
    num_attention_heads: heads,
    max_position_embeddings: options.maxPositions ?? 512,
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    bos_token_id: BOS,
    eos_token_id: EOS,
    torch_dtype: options.dtype === 'bf16' ? 'bfloat16' : 'float32',
    ...(options.quantize ? { quantization_config: { quant_method: INT8_QUANT_METHOD, bits: 8, scheme: 'per-channel-symmetric', weight_only: true } } : {}),
  };
  checkConfig(config, 'checkpoint options');
  const normal = randomNormals(options.seed);
  const floats = (values: Float32Array): Pick<TensorToWrite, 'dtype' | 'data'> =>
    options.dtype === 'bf16' ? { dtype: 'BF16', data: float32ToBf16(values) } : { dtype: 'F32', data: new Uint8Array(values.buffer) };
  const tensors: TensorToWrite[] = [];
  for (const [name, spec] of expectedTensors(config)) {
    const count = spec.shape.reduce((product, dim) => product * dim, 1);
    const values = new Float32Array(count);
    if (name.endsWith('layernorm.weight') || name === 'model.norm.weight') values.fill(1);
    else {
      const std = name === 'model.embed_tokens.weight' ? 1 : 1 / Math.sqrt(spec.shape[1]!);
      for (let index = 0; index < count; index++) values[index] = normal() * std;
    }
    if (options.quantize === 'int8' && spec.linear) {
      const [rows, columns] = spec.shape as [number, number];
      const q = new Int8Array(count);
      const scales = new Float32Array(rows);
      for (let row = 0; row < rows; row++) {
        let max = 0;
        for (let column = 0; column < columns; column++) max = Math.max(max, Math.abs(values[row * columns + column]!));
        const scale = max / 127 || 1;
        scales[row] = scale;
        for (let column = 0; column < columns; column++) q[row * columns + column] = Math.round(values[row * columns + column]! / scale);
      }
      const base = name.replace(/\.weight$/, '');
      tensors.push({ name: `${base}.qweight`, dtype: 'I8', shape: spec.shape, data: new Uint8Array(q.buffer) });
      tensors.push({ name: `${base}.weight_scale`, dtype: 'F32', shape: [rows], data: new Uint8Array(scales.buffer) });
      continue;
    }
    tensors.push({ name, shape: spec.shape, ...floats(values) });
  }

  mkdirSync(directory, { recursive: true, ...(modes.directory === undefined ? {} : { mode: modes.directory }) });
  const write = (name: string, data: string | Uint8Array) => writeFileSync(join(directory, name), data, modes.file === undefined ? {} : { mode: modes.file });
  write('config.json', `${JSON.stringify(config, null, 2)}\n`);
  const shards = Math.max(1, Math.min(options.shards ?? 1, tensors.length));
  const metadata = { format: 'pt', generator: 'spool checkpoint create', seed: String(options.seed) };
  if (shards === 1) {
    write('model.safetensors', serialize(tensors, metadata));
    return config;
  }
  const weightMap: Record<string, string> = {};
  const per = Math.ceil(tensors.length / shards);
  let totalSize = 0;
  for (let shard = 0; shard < shards; shard++) {
    const part = tensors.slice(shard * per, (shard + 1) * per);
    if (part.length === 0) continue;
    const file = `model-${String(shard + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`;
    write(file, serialize(part, metadata));
    for (const tensor of part) {
      weightMap[tensor.name] = file;
      totalSize += tensor.data.length;
    }
  }
  write('model.safetensors.index.json', `${JSON.stringify({ metadata: { total_size: totalSize }, weight_map: weightMap }, null, 2)}\n`);
  return config;
}

export { SafetensorsError };
