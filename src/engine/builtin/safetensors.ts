// The safetensors format, read and written here rather than through a library: an 8-byte
// little-endian header length, a JSON header (tensor name → dtype, shape, data_offsets, plus an
// optional __metadata__ map of strings), then the data buffer the offsets point into.

export const DTYPE_BYTES = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  I64: 8,
  U64: 8,
  F64: 8,
} as const;
export type Dtype = keyof typeof DTYPE_BYTES;

/** Header size limit of the reference implementation: a larger header is refused unread. */
export const MAX_HEADER_BYTES = 100 * 1024 * 1024;

export interface TensorInfo {
  readonly name: string;
  readonly dtype: Dtype;
  readonly shape: readonly number[];
  /** Offsets into the data buffer (after the header): [begin, end). */
  readonly begin: number;
  readonly end: number;
}

export interface SafetensorsHeader {
  /** Bytes before the data buffer: 8 + the header length. */
  readonly dataStart: number;
  readonly metadata: Readonly<Record<string, string>>;
  readonly tensors: readonly TensorInfo[];
  /** Total size a complete file has: dataStart + the data buffer. */
  readonly expectedFileSize: number;
}

export class SafetensorsError extends Error {
  override readonly name = 'SafetensorsError';
}

/** Reads the 8-byte prefix: how long the JSON header is. */
export function headerLength(prefix: Uint8Array, source = 'file'): number {
  if (prefix.length < 8) throw new SafetensorsError(`${source}: truncated: ${prefix.length} bytes, less than the 8-byte header length`);
  const length = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (length > BigInt(MAX_HEADER_BYTES)) throw new SafetensorsError(`${source}: header is ${length} bytes, more than the ${MAX_HEADER_BYTES}-byte limit`);
  if (length < 2n) throw new SafetensorsError(`${source}: header length ${length} is too small for a JSON object`);
  return Number(length);
}

/**
 * Parses and checks a header: JSON object; every tensor with a known dtype, a shape of
 * non-negative integers and offsets whose size is shape × dtype; tensors laid out in offset order
 * with no overlap and no gap, covering the data buffer from 0.
 */
export function parseHeader(headerBytes: Uint8Array, source = 'file'): SafetensorsHeader {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(headerBytes));
  } catch (error) {
    throw new SafetensorsError(`${source}: header is not valid UTF-8 JSON: ${(error as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new SafetensorsError(`${source}: header is not a JSON object`);
  const metadata: Record<string, string> = {};
  const tensors: TensorInfo[] = [];
  for (const [name, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new SafetensorsError(`${source}: __metadata__ must be an object of strings`);
      for (const [key, text] of Object.entries(value as Record<string, unknown>)) {
        if (typeof text !== 'string') throw new SafetensorsError(`${source}: __metadata__.${key} is not a string`);
        metadata[key] = text;
      }
      continue;
    }
    const entry = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (entry === null || typeof entry !== 'object') throw new SafetensorsError(`${source}: tensor ${name} is not an object`);
    if (typeof entry.dtype !== 'string' || !(entry.dtype in DTYPE_BYTES)) throw new SafetensorsError(`${source}: tensor ${name} has unknown dtype ${JSON.stringify(entry.dtype)}`);
    if (!Array.isArray(entry.shape) || !entry.shape.every((dim) => Number.isSafeInteger(dim) && dim >= 0)) {
      throw new SafetensorsError(`${source}: tensor ${name} has an invalid shape ${JSON.stringify(entry.shape)}`);
    }
    const offsets = entry.data_offsets;
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((offset) => Number.isSafeInteger(offset) && offset >= 0) || offsets[0] > offsets[1]) {
      throw new SafetensorsError(`${source}: tensor ${name} has invalid data_offsets ${JSON.stringify(offsets)}`);
    }
    const dtype = entry.dtype as Dtype;
    const shape = entry.shape as number[];
    const [begin, end] = offsets as [number, number];
    const elements = shape.reduce((product, dim) => product * dim, 1);
    if (end - begin !== elements * DTYPE_BYTES[dtype]) {
      throw new SafetensorsError(
        `${source}: tensor ${name} spans ${end - begin} bytes but its shape [${shape.join(', ')}] of ${dtype} needs ${elements * DTYPE_BYTES[dtype]}`,
      );
    }
    tensors.push({ name, dtype, shape, begin, end });
  }
  tensors.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let cursor = 0;
  for (const tensor of tensors) {
    if (tensor.begin < cursor) throw new SafetensorsError(`${source}: tensor ${tensor.name} overlaps the tensor before it (offset ${tensor.begin} < ${cursor})`);
    if (tensor.begin > cursor) throw new SafetensorsError(`${source}: a gap of ${tensor.begin - cursor} bytes lies before tensor ${tensor.name}`);
    cursor = tensor.end;
  }
  const dataStart = 8 + headerBytes.length;
  return { dataStart, metadata, tensors, expectedFileSize: dataStart + cursor };
}

/** Parses a whole file held in memory, checking that it is exactly as long as its header says. */
export function parseFile(bytes: Uint8Array, source = 'file'): SafetensorsHeader {
  const length = headerLength(bytes, source);
  if (bytes.length < 8 + length) throw new SafetensorsError(`${source}: truncated: the header needs ${8 + length} bytes, the file has ${bytes.length}`);
  const header = parseHeader(bytes.subarray(8, 8 + length), source);
  if (bytes.length < header.expectedFileSize) {
    throw new SafetensorsError(`${source}: truncated: the tensors need ${header.expectedFileSize} bytes, the file has ${bytes.length}`);
  }
  if (bytes.length > header.expectedFileSize) {
    throw new SafetensorsError(`${source}: ${bytes.length - header.expectedFileSize} bytes follow the last tensor`);
  }
  return header;
}

export interface TensorToWrite {
  readonly name: string;
  readonly dtype: Dtype;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

/** A complete safetensors file. The header is padded with spaces to a multiple of 8, as the reference writer does. */
export function serialize(tensors: readonly TensorToWrite[], metadata: Record<string, string> = {}): Buffer {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const tensor of tensors) {
    header[tensor.name] = { dtype: tensor.dtype, shape: tensor.shape, data_offsets: [offset, offset + tensor.data.length] };
    offset += tensor.data.length;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const headerBytes = Buffer.from(json);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(headerBytes.length));
  return Buffer.concat([prefix, headerBytes, ...tensors.map((tensor) => Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength))]);
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A tensor's values as float32, whatever its stored dtype (F32, BF16, F16, I8). */
export function toFloat32(bytes: Uint8Array, dtype: Dtype, source: string): Float32Array {
  const count = bytes.length / DTYPE_BYTES[dtype];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(count);
  switch (dtype) {
    case 'F32':
      if (LITTLE_ENDIAN) return new Float32Array(new Uint8Array(bytes).buffer); // an aligned copy of just these bytes
      for (let index = 0; index < count; index++) out[index] = view.getFloat32(index * 4, true);
      return out;
    case 'BF16': {
      const scratch = new DataView(new ArrayBuffer(4));
      for (let index = 0; index < count; index++) {
        scratch.setUint32(0, view.getUint16(index * 2, true) << 16);
        out[index] = scratch.getFloat32(0);
      }
      return out;
    }
    case 'I8':
      for (let index = 0; index < count; index++) out[index] = view.getInt8(index);
      return out;
    default:
      throw new SafetensorsError(`${source}: dtype ${dtype} is not supported by the built-in engine (F32, BF16, I8)`);
  }
}

/** float32 values as BF16 bytes (round to nearest even). */
export function float32ToBf16(values: Float32Array): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  const scratch = new DataView(new ArrayBuffer(4));
  const target = new DataView(out.buffer);
  for (let index = 0; index < values.length; index++) {
    scratch.setFloat32(0, values[index]!);
    const bits = scratch.getUint32(0);
    const rounded = (bits + 0x7fff + ((bits >> 16) & 1)) >>> 16;
    target.setUint16(index * 2, rounded, true);
  }
  return out;
}
