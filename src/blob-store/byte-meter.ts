import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

export class SizeLimitExceededError extends Error {
  override readonly name = 'SizeLimitExceededError';
  constructor(readonly limitName: string, readonly limitBytes: number) {
    super(`${limitName} is ${limitBytes} bytes`);
  }
}

/**
 * Passes bytes through while counting them and hashing them with sha256; fails the stream the
 * moment the count passes the limit, so an over-limit body is cut off, not stored and measured.
 */
export class ByteMeter extends Transform {
  private readonly hash = createHash('sha256');
  bytes = 0;

  constructor(private readonly limit: { bytes: number; name: string } = { bytes: Number.POSITIVE_INFINITY, name: 'size limit' }) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.limit.bytes) {
      callback(new SizeLimitExceededError(this.limit.name, this.limit.bytes));
      return;
    }
    this.hash.update(chunk);
    callback(null, chunk);
  }

  /** The sha256 of everything that passed; call once the stream has ended. */
  digest(): string {
    return this.hash.digest('hex');
  }
}
