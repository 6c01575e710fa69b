import { readdirSync, readlinkSync } from 'node:fs';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { lentPieces } from '../src/blob-store/file-content-stream.js';
import { LocalBlobStore } from '../src/blob-store/local-blob-store.js';
import { BlobNotFoundError } from '../src/blob-store/blob-store.js';
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

  it('reads a blob of 64 KiB or less whole when asked for it, as one buffer: lent as it is, found missing at once', async () => {
    const root = tempDir('blobs-in-place');
    const store = new LocalBlobStore(root);
    const content = Buffer.from(Array.from({ length: 65_537 }, (_, at) => at % 253));
    await store.put('parts/edge', Readable.from([content]));
    const pieces = async (range?: { start: number; end: number }) => {
      const read: Buffer[] = [];
      for await (const piece of lentPieces(await store.get('parts/edge', range), Buffer.alloc(1024))) read.push(Buffer.from(piece));
      return read;
    };
    // 64 KiB put in two pieces, whole and by range: the same bytes back.
    await store.put('parts/fits', Readable.from([content.subarray(0, 40_000), content.subarray(40_000, 65_536)]));
    expect(Buffer.concat(await (await store.get('parts/fits')).toArray()).equals(content.subarray(0, 65_536))).toBe(true);
    expect(readdirSync(root, { recursive: true }).map(String).filter((name) => name.includes('.partial'))).toEqual([]);
    // 65,536 bytes: read in place, one piece however small the lent buffer; one byte more: streamed through it.
    expect((await pieces({ start: 1, end: 65_536 })).map((piece) => piece.length)).toEqual([65_536]);
    expect(Buffer.concat(await pieces({ start: 1, end: 65_536 })).equals(content.subarray(1))).toBe(true);
    const streamed = await pieces();
    expect(streamed.length).toBe(65);
    expect(Buffer.concat(streamed).equals(content)).toBe(true);
    // The bytes are read when asked for: the blob may go after, and no file stays open.
    await store.put('parts/gone', Readable.from([Buffer.from('abc')]));
    const early = await store.get('parts/gone');
    await store.delete('parts/gone');
    expect(Buffer.concat(await early.toArray()).toString()).toBe('abc');
    await expect(store.get('parts/gone')).rejects.toThrow(BlobNotFoundError);
    const openFiles = readdirSync('/proc/self/fd').map((fd) => { try { return readlinkSync(`/proc/self/fd/${fd}`); } catch { return ''; } });
    expect(openFiles.filter((path) => path.startsWith(root))).toEqual([]);
  });

  it('lends a larger blob out through one buffer: each piece a view of it, the file closed at the end', async () => {
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
    const range = await lend({ start: 70_000, end: 139_999 });
    expect(Buffer.concat(range.pieces).equals(content.subarray(70_000, 140_000))).toBe(true);
    // Once read as a stream, it cannot be lent too (the pieces read would be lost).
    const read = await store.get('parts/lent');
    read.read(0);
    await new Promise((resolve) => read.once('readable', resolve));
    await expect(lentPieces(read, buffer)[Symbol.asyncIterator]().next()).rejects.toThrow('lent out once, before it is read');
    read.destroy();
  });
});
