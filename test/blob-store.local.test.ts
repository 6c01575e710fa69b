import { readdirSync } from 'node:fs';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { lentPieces } from '../src/blob-store/file-content-stream.js';
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
    // Read as any stream: 64 KiB, then the 34,464 bytes left.
    const small = await buffers('parts/small');
    expect(small.map((buffer) => [buffer.length, buffer.buffer.byteLength])).toEqual([
      [65_536, 65_536],
      [34_464, 34_464],
    ]);
    expect(await buffers('parts/empty')).toEqual([]);
    // A range past the end stops at the end.
    expect((await buffers('parts/small', { start: 99_990, end: 200_000 })).map((buffer) => buffer.buffer.byteLength)).toEqual([10]);
  });

  it('lends a blob out through one buffer: each piece a view of it, the file closed at the end', async () => {
    const store = new LocalBlobStore(tempDir('blobs-lend'));
    const content = Buffer.from(Array.from({ length: 150_000 }, (_, at) => at % 251));
    await store.put('parts/lent', Readable.from([content]));
    const buffer = Buffer.alloc(65_536);
    const lend = async (range?: { start: number; end: number }) => {
      const stream = await store.get('parts/lent', range);
      const pieces: Buffer[] = [];
      for await (const piece of lentPieces(stream, buffer)) {
        expect(piece.buffer).toBe(buffer.buffer);
        pieces.push(Buffer.from(piece));
      }
      await new Promise((resolve) => setImmediate(resolve));
      return { pieces, closed: stream.destroyed };
    };
    const whole = await lend();
    expect(whole.pieces.map((piece) => piece.length)).toEqual([65_536, 65_536, 18_928]);
    expect(Buffer.concat(whole.pieces).equals(content)).toBe(true);
    expect(whole.closed).toBe(true);
    const range = await lend({ start: 70_000, end: 70_009 });
    expect(Buffer.concat(range.pieces).equals(content.subarray(70_000, 70_010))).toBe(true);
    // Once read as a stream, it cannot be lent too (the pieces read would be lost).
    const read = await store.get('parts/lent');
    read.read(0);
    await new Promise((resolve) => read.once('readable', resolve));
    await expect(lentPieces(read, buffer)[Symbol.asyncIterator]().next()).rejects.toThrow('lent out once, before it is read');
    read.destroy();
  });
});
