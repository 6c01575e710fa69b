import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { GetObjectCommand, HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { type S3Addressing, bucketAddressingProblem } from '../platform/s3-location.js';
import type { CheckpointManifest } from '../domain/checkpoint-compatibility.js';
import { headerLength, parseHeader } from './builtin/safetensors.js';
import { ConcurrencyLimit } from '../platform/concurrency-limit.js';
import { PRIVATE_FILE_MODE, makePrivateDirectoryAsync } from '../platform/private-files.js';
import { isNotFound } from '../platform/s3-client.js';

export interface CheckpointFile {
  readonly name: string;
  readonly bytes: number;
  readonly etag: string;
}

export interface RemoteCheckpoint {
  readonly manifest: CheckpointManifest;
  /** config.json, the index when there is one, and every shard. */
  readonly files: readonly CheckpointFile[];
}

/** The checkpoint is not a valid one (as opposed to a transfer that failed): not worth retrying. */
export class InvalidCheckpointError extends Error {
  override readonly name = 'InvalidCheckpointError';
  constructor(
    message: string,
    /** Why, for the log, where the message says less. */
    readonly detail?: string,
  ) {
    super(message);
  }
}

const MIB = 1024 * 1024;

/**
 * Reads a Hugging Face-style checkpoint folder in S3. Validation reads only config.json, the
 * index and each shard's safetensors header, with ranged GETs pinned to the ETag the HEAD saw, so
 * a checkpoint that changes mid-read is noticed. The transfer streams each file with parallel
 * ranged GETs written at their offsets: memory holds `parallel` parts, whatever the size.
 */
export class S3CheckpointSource {
  constructor(
    private readonly client: S3Client,
    /** How `client` addresses buckets: a bucket it cannot address is refused before any request. */
    private readonly addressing: S3Addressing = {},
    private readonly settings: { partBytes: number; parallel: number } = { partBytes: 8 * MIB, parallel: 4 },
  ) {}

  /**
   * A location the client cannot address fails as a checkpoint that cannot be read, with the same
   * message whatever the bucket; the reason is the error's detail, for the log.
   */
  private assertAddressable(bucket: string, prefix: string): void {
    const problem = bucketAddressingProblem(bucket, this.addressing);
    if (problem) throw new InvalidCheckpointError(`The checkpoint s3://${bucket}/${prefix} could not be read`, `bucket refused: ${problem}`);
  }

  async describe(bucket: string, prefix: string): Promise<RemoteCheckpoint> {
    this.assertAddressable(bucket, prefix);
    const config = await this.head(bucket, `${prefix}config.json`);
    if (!config) throw new InvalidCheckpointError(`s3://${bucket}/${prefix} has no config.json`);
    const configJson = JSON.parse((await this.read(bucket, `${prefix}config.json`, config.etag)).toString('utf8')) as Record<string, unknown>;
    const files: CheckpointFile[] = [{ name: 'config.json', ...config }];

    let shards = ['model.safetensors'];
    const index = await this.head(bucket, `${prefix}model.safetensors.index.json`);
    if (index) {
      files.push({ name: 'model.safetensors.index.json', ...index });
      const parsed = JSON.parse((await this.read(bucket, `${prefix}model.safetensors.index.json`, index.etag)).toString('utf8')) as { weight_map?: Record<string, string> };
      shards = [...new Set(Object.values(parsed.weight_map ?? {}))];
      if (shards.length === 0 || shards.some((shard) => shard.includes('/'))) throw new InvalidCheckpointError('model.safetensors.index.json names no shard, or names one outside the folder');
    }
    const tensors: Record<string, { dtype: string; shape: readonly number[] }> = {};
    for (const shard of shards) {
      const key = `${prefix}${shard}`;
      const info = await this.head(bucket, key);
      if (!info) throw new InvalidCheckpointError(`s3://${bucket}/${key} does not exist`);
      let header;
      try {
        const length = headerLength(await this.read(bucket, key, info.etag, { start: 0, end: 7 }), shard);
        header = parseHeader(await this.read(bucket, key, info.etag, { start: 8, end: 8 + length - 1 }), shard);
      } catch (error) {
        if (error instanceof Error && error.name === 'SafetensorsError') throw new InvalidCheckpointError(error.message);
        throw error;
      }
      if (header.expectedFileSize !== info.bytes) throw new InvalidCheckpointError(`${shard} is ${info.bytes} bytes; its header describes ${header.expectedFileSize}`);
      for (const tensor of header.tensors) tensors[tensor.name] = { dtype: tensor.dtype, shape: tensor.shape };
      files.push({ name: shard, ...info });
    }
    const quantization = configJson.quantization_config;
    return {
      manifest: {
        architectures: Array.isArray(configJson.architectures) ? (configJson.architectures as string[]) : [],
        model_type: String(configJson.model_type ?? ''),
        quantization_config: quantization && typeof quantization === 'object' ? (quantization as Record<string, unknown>) : null,
        tensors,
      },
      files,
    };
  }

  /**
   * Copies the files into a folder; returns each one's size and sha256. The files are fetched side
   * by side through one pool of `parallel` ranged GETs, so a file's last parts, or its hashing, do
   * not leave the pool idle.
   */
  async transfer(bucket: string, prefix: string, files: readonly CheckpointFile[], folder: string): Promise<Array<{ name: string; bytes: number; sha256: string }>> {
    this.assertAddressable(bucket, prefix);
    await makePrivateDirectoryAsync(folder);
    const pool = new ConcurrencyLimit(this.settings.parallel);
    const settled = await Promise.allSettled(files.map((file) => this.transferFile(bucket, prefix, file, folder, pool)));
    const failed = settled.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
    if (failed) throw failed.reason;
    return settled.map((outcome) => (outcome as PromiseFulfilledResult<{ name: string; bytes: number; sha256: string }>).value);
  }

  private async transferFile(bucket: string, prefix: string, file: CheckpointFile, folder: string, pool: ConcurrencyLimit): Promise<{ name: string; bytes: number; sha256: string }> {
    const target = join(folder, file.name);
    const partial = `${target}.partial`;
    const handle = await open(partial, 'w', PRIVATE_FILE_MODE);
    try {
      const parts: Array<{ start: number; end: number }> = [];
      for (let start = 0; start < file.bytes; start += this.settings.partBytes) parts.push({ start, end: Math.min(file.bytes, start + this.settings.partBytes) - 1 });
      let failure: unknown;
      await Promise.all(
        parts.map((part) =>
          pool.run(async () => {
            if (failure) return;
            try {
              // The part's pieces are written as they came, in one call, without joining them first.
              const pieces = await this.readPieces(bucket, `${prefix}${file.name}`, file.etag, part);
              const length = pieces.reduce((sum, piece) => sum + piece.length, 0);
              if (length !== part.end - part.start + 1) throw new Error(`${file.name}: bytes ${part.start}-${part.end} came back as ${length} bytes`);
              let written = 0;
              while (written < length) {
                const { bytesWritten } = await handle.writev(unwritten(pieces, written), part.start + written);
                written += bytesWritten;
              }
            } catch (error) {
              failure ??= error;
            }
          }),
        ),
      );
      if (failure) throw failure;
      await handle.sync();
    } catch (error) {
      await handle.close();
      await rm(partial, { force: true });
      throw error;
    }
    await handle.close();
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const chunk of createReadStream(partial, { highWaterMark: MIB })) {
      hash.update(chunk as Buffer);
      bytes += (chunk as Buffer).length;
    }
    if (bytes !== file.bytes) throw new Error(`${file.name}: staged ${bytes} bytes, expected ${file.bytes}`);
    await rename(partial, target);
    return { name: file.name, bytes, sha256: hash.digest('hex') };
  }

  private async head(bucket: string, key: string): Promise<{ bytes: number; etag: string } | undefined> {
    try {
      const answer = await this.client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      return { bytes: answer.ContentLength ?? 0, etag: answer.ETag ?? '' };
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  private async read(bucket: string, key: string, etag: string, range?: { start: number; end: number }): Promise<Buffer> {
    return Buffer.concat(await this.readPieces(bucket, key, etag, range));
  }

  private async readPieces(bucket: string, key: string, etag: string, range?: { start: number; end: number }): Promise<Buffer[]> {
    const answer = await this.client.send(
      new GetObjectCommand({ Bucket: bucket, Key: key, ...(etag ? { IfMatch: etag } : {}), ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }),
    );
    const chunks: Buffer[] = [];
    for await (const chunk of answer.Body as AsyncIterable<Buffer>) chunks.push(chunk);
    return chunks;
  }
}

/** The pieces from byte `offset` of their concatenation on. */
function unwritten(pieces: readonly Buffer[], offset: number): Buffer[] {
  if (offset === 0) return pieces as Buffer[];
  const rest: Buffer[] = [];
  let skip = offset;
  for (const piece of pieces) {
    if (skip >= piece.length) skip -= piece.length;
    else {
      rest.push(skip > 0 ? piece.subarray(skip) : piece);
      skip = 0;
    }
  }
  return rest;
}
