import type { Readable } from 'node:stream';

// The blob store port: file contents, generated outputs, staged checkpoints. Both adapters (a local
// directory, S3) are held to it by one contract suite (test/blob-store.contract.ts).

export interface BlobStore {
  /**
   * Stores the chunks (a stream, or any async iterable) under key, all or nothing: if they fail or
   * the stream is destroyed, no object (and no partial object) is left under key, and the error is
   * rethrown. A chunk is the store's only until it asks for the next: a producer may reuse its
   * memory then (the finalizer copies every chunk's output part through one buffer).
   */
  put(key: string, body: AsyncIterable<Uint8Array>): Promise<void>;
  /** The object's bytes, or a byte range of them (end inclusive); BlobNotFoundError if absent. */
  get(key: string, range?: { start: number; end: number }): Promise<Readable>;
  /** The object's size and when it was last written, or undefined if there is none. */
  head(key: string): Promise<BlobHead | undefined>;
  /** Removes the object; removing an absent object is not an error. */
  delete(key: string): Promise<void>;
  /** Keys under a prefix, in no particular order (without asking each object's age, as entries() must). */
  list(prefix: string): AsyncIterable<string>;
  /** Objects under a prefix with when each was last written, in no particular order. */
  entries(prefix: string): AsyncIterable<BlobEntry>;
  /**
   * Removes what puts cut short by a dead process left behind (a local partial file, an incomplete
   * S3 multipart upload) that has not been written to since `before`; returns how many. A put in
   * progress writes all the time, so it is left alone unless it stalled since `before`.
   */
  removeAbandonedWrites(before: Date): Promise<number>;
  /** Where objects live, for logs and /ready. */
  readonly description: string;
  /** Which adapter this is, for /ready (so nothing asks the configuration again). */
  readonly kind: 'local' | 's3';
}

export interface BlobHead {
  readonly size: number;
  readonly modifiedAt: Date;
}

export interface BlobEntry {
  readonly key: string;
  readonly modifiedAt: Date;
}

export class BlobNotFoundError extends Error {
  override readonly name = 'BlobNotFoundError';
  constructor(readonly key: string) {
    super(`no blob under ${key}`);
  }
}

/** Keys are relative paths of safe segments; they never come from a client. */
export function assertBlobKey(key: string): void {
  if (!/^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/.test(key) || key.split('/').some((part) => part === '..' || part === '.')) {
    throw new Error(`invalid blob key ${JSON.stringify(key)}`);
  }
}
