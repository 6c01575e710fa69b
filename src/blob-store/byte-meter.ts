import { createHash } from 'node:crypto';

export class SizeLimitExceededError extends Error {
  override readonly name = 'SizeLimitExceededError';
  constructor(readonly limitName: string, readonly limitBytes: number) {
    super(`${limitName} is ${limitBytes} bytes`);
  }
}

/**
 * Counts and hashes (sha256) the chunks on their way to the blob store, and fails the moment the
 * count passes the limit, so an over-limit body is cut off, not stored and measured. It passes
 * each chunk on as it came and asks for the next only when the store does: a producer that reuses
 * a chunk's memory (see BlobStore.put) still has its chunks hashed before they are reused.
 */
export class ByteMeter {
  private readonly hash = createHash('sha256');
  bytes = 0;

  constructor(private readonly limit: { bytes: number; name: string } = { bytes: Number.POSITIVE_INFINITY, name: 'size limit' }) {}

  async *measure(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<Uint8Array> {
    for await (const piece of body) {
      const chunk = typeof piece === 'string' ? Buffer.from(piece) : piece;
      this.bytes += chunk.length;
      if (this.bytes > this.limit.bytes) throw new SizeLimitExceededError(this.limit.name, this.limit.bytes);
      this.hash.update(chunk);
      yield chunk;
    }
  }

  /** The sha256 of everything that passed; call once the body has ended. */
  digest(): string {
    return this.hash.digest('hex');
  }
}
