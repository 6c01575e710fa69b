import { readdirSync } from 'node:fs';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LocalBlobStore } from '../src/blob-store/local-blob-store.js';
import { blobStoreContract } from './support/blob-store-contract.js';
import { tempDir } from './support/service.js';

blobStoreContract('local directory', async () => new LocalBlobStore(tempDir('blobs')));

describe('the local blob store on disk', () => {
  it('never leaves a hidden partial file behind a failed put', async () => {
    const root = tempDir('blobs-partial');
    const store = new LocalBlobStore(root);
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(1024, 1));
        this.destroy(new Error('gone'));
      },
    });
    await expect(store.put('a/b', failing)).rejects.toThrow('gone');
    const leftovers = readdirSync(root, { recursive: true }).map(String).filter((name) => name.includes('.partial') || name.endsWith('b'));
    expect(leftovers).toEqual([]);
  });

  it('reads a small blob into buffers no larger than it, and an empty one into none', async () => {
    const store = new LocalBlobStore(tempDir('blobs-sizes'));
    await store.put('parts/small', Readable.from([Buffer.alloc(100_000, 7)]));
    await store.put('parts/empty', Readable.from([]));
    const buffers = async (key: string, range?: { start: number; end: number }) => {
      const read: Buffer[] = [];
      for await (const chunk of await store.get(key, range)) read.push(chunk as Buffer);
      return read;
    };
    // A chunk's part of an output file, as the finalizer copies it: 64 KiB, then the 34,464 bytes left.
    const small = await buffers('parts/small');
    expect(small.map((buffer) => [buffer.length, buffer.buffer.byteLength])).toEqual([
      [65_536, 65_536],
      [34_464, 34_464],
    ]);
    expect(await buffers('parts/empty')).toEqual([]);
    // A range past the end stops at the end.
    expect((await buffers('parts/small', { start: 99_990, end: 200_000 })).map((buffer) => buffer.buffer.byteLength)).toEqual([10]);
  });
});
