import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BlobStore, BlobNotFoundError } from '../../src/blob-store/blob-store.js';

export async function readAllBytes(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function listKeys(store: BlobStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of store.list(prefix)) keys.push(key);
  return keys.sort();
}

/** A destination that takes its time over each write and keeps a copy of what it was given. */
function slowDestination(failAfter?: number): Writable & { received(): Buffer } {
  const chunks: Buffer[] = [];
  let taken = 0;
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      // A copy: the chunk is the writer's again once the callback is called.
      chunks.push(Buffer.from(chunk));
      taken += chunk.length;
      setTimeout(() => callback(failAfter !== undefined && taken >= failAfter ? new Error('client went away') : null), 1);
    },
  });
  return Object.assign(destination, { received: () => Buffer.concat(chunks) });
}

/** A stream of `total` bytes in 64 KiB chunks that fails after `failAfter` bytes, if given. */
function generated(total: number, failAfter?: number): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (failAfter !== undefined && sent >= failAfter) {
        this.destroy(new Error('client went away'));
        return;
      }
      if (sent >= total) {
        this.push(null);
        return;
      }
      const size = Math.min(65536, total - sent);
      sent += size;
      this.push(Buffer.alloc(size, sent % 251));
    },
  });
}

/** What every blob store adapter must do. Keys are made unique per run. */
export function blobStoreContract(name: string, open: () => Promise<BlobStore>): void {
  describe(`blob store contract: ${name}`, () => {
    let store: BlobStore;
    const run = `contract-${randomUUID()}`;
    beforeAll(async () => {
      store = await open();
    });
    afterAll(async () => {
      for (const key of await listKeys(store, run)) await store.delete(key);
    });

    it('stores a stream and gives the same bytes back, whole and by range', async () => {
      const content = randomBytes(300_000);
      await store.put(`${run}/a/object.bin`, Readable.from([content.subarray(0, 1000), content.subarray(1000)]));
      expect(await store.head(`${run}/a/object.bin`)).toEqual({ size: content.length, modifiedAt: expect.any(Date) });
      expect((await readAllBytes(await store.get(`${run}/a/object.bin`))).equals(content)).toBe(true);
      const range = await readAllBytes(await store.get(`${run}/a/object.bin`, { start: 1000, end: 1999 }));
      expect(range.equals(content.subarray(1000, 2000))).toBe(true);
    });

    it('gives the same bytes to a slow destination it is piped into, whole and by range', async () => {
      const content = randomBytes(1_000_000);
      await store.put(`${run}/piped.bin`, Readable.from([content]));
      const whole = slowDestination();
      await pipeline(await store.get(`${run}/piped.bin`), whole);
      expect(whole.received().equals(content)).toBe(true);
      const range = slowDestination();
      await pipeline(await store.get(`${run}/piped.bin`, { start: 70_000, end: 299_999 }), range);
      expect(range.received().equals(content.subarray(70_000, 300_000))).toBe(true);
    });

    it('stops reading when the destination it is piped into fails', async () => {
      await store.put(`${run}/abandoned.bin`, Readable.from([randomBytes(1_000_000)]));
      const source = await store.get(`${run}/abandoned.bin`);
      const destination = slowDestination(200_000);
      await expect(pipeline(source, destination)).rejects.toThrow('client went away');
      expect(source.destroyed).toBe(true);
      expect(destination.received().length).toBeLessThan(1_000_000);
    });

    it('stores an empty stream as an empty object', async () => {
      await store.put(`${run}/empty`, Readable.from([]));
      expect(await store.head(`${run}/empty`)).toEqual({ size: 0, modifiedAt: expect.any(Date) });
      expect((await readAllBytes(await store.get(`${run}/empty`))).length).toBe(0);
    });

    it('streams an object larger than one upload part', async () => {
      const size = 12 * 1024 * 1024 + 123;
      await store.put(`${run}/large`, generated(size));
      expect(await store.head(`${run}/large`)).toEqual({ size, modifiedAt: expect.any(Date) });
      const tail = await readAllBytes(await store.get(`${run}/large`, { start: size - 10, end: size - 1 }));
      expect(tail.length).toBe(10);
    });

    it('is done with a chunk when it asks for the next: a producer reusing one buffer stores what it meant, small or large', async () => {
      // Chunks of 1 to 64 KiB, each written into the same buffer; the store must have copied or
      // written a chunk before it asks for the next one.
      const lent = (total: number) => {
        const buffer = Buffer.alloc(65536);
        const meant = createHash('sha256');
        async function* chunks() {
          for (let sent = 0, turn = 0; sent < total; turn++) {
            const size = Math.min(total - sent, 1024 * (1 + ((turn * 37) % 64)));
            buffer.fill(turn % 251, 0, size);
            meant.update(buffer.subarray(0, size));
            sent += size;
            yield buffer.subarray(0, size);
          }
        }
        return { chunks: chunks(), meant: () => meant.digest('hex') };
      };
      for (const [name, size] of [['lent-whole', 60_000], ['lent-edge', 65_537], ['lent-small', 300_000], ['lent-large', 12 * 1024 * 1024 + 5]] as const) {
        const producer = lent(size);
        await store.put(`${run}/${name}`, producer.chunks);
        const stored = await readAllBytes(await store.get(`${run}/${name}`));
        expect(stored.length, name).toBe(size);
        expect(createHash('sha256').update(stored).digest('hex'), name).toBe(producer.meant());
      }
    });

    it('leaves nothing behind when the stream fails midway, small or large', async () => {
      await expect(store.put(`${run}/broken-tiny`, generated(50_000, 20_000))).rejects.toThrow('client went away');
      await expect(store.put(`${run}/broken-small`, generated(1_000_000, 100_000))).rejects.toThrow('client went away');
      await expect(store.put(`${run}/broken-large`, generated(30 * 1024 * 1024, 20 * 1024 * 1024))).rejects.toThrow('client went away');
      expect(await store.head(`${run}/broken-tiny`)).toBeUndefined();
      expect(await store.head(`${run}/broken-small`)).toBeUndefined();
      expect(await store.head(`${run}/broken-large`)).toBeUndefined();
      expect((await listKeys(store, run)).filter((key) => key.includes('broken'))).toEqual([]);
    });

    it('replaces an object put twice under one key', async () => {
      await store.put(`${run}/twice`, Readable.from([Buffer.from('first')]));
      await store.put(`${run}/twice`, Readable.from([Buffer.from('second!')]));
      expect((await readAllBytes(await store.get(`${run}/twice`))).toString()).toBe('second!');
    });

    it('reports an absent object as not found and deletes idempotently', async () => {
      await expect(store.get(`${run}/absent`)).rejects.toBeInstanceOf(BlobNotFoundError);
      expect(await store.head(`${run}/absent`)).toBeUndefined();
      await store.put(`${run}/doomed`, Readable.from([Buffer.from('x')]));
      await store.delete(`${run}/doomed`);
      await store.delete(`${run}/doomed`);
      expect(await store.head(`${run}/doomed`)).toBeUndefined();
    });

    it('lists keys under a prefix', async () => {
      await store.put(`${run}/list/one`, Readable.from([Buffer.from('1')]));
      await store.put(`${run}/list/deeper/two`, Readable.from([Buffer.from('2')]));
      expect(await listKeys(store, `${run}/list/`)).toEqual([`${run}/list/deeper/two`, `${run}/list/one`]);
    });

    it('lists by a prefix that ends inside a name, and by one that names nothing', async () => {
      await store.put(`${run}/by/one`, Readable.from([Buffer.from('1')]));
      await store.put(`${run}/by/other`, Readable.from([Buffer.from('2')]));
      await store.put(`${run}/by/two/deeper`, Readable.from([Buffer.from('3')]));
      await store.put(`${run}/byway/one`, Readable.from([Buffer.from('4')]));
      expect(await listKeys(store, `${run}/by/o`)).toEqual([`${run}/by/one`, `${run}/by/other`]);
      expect(await listKeys(store, `${run}/by/t`)).toEqual([`${run}/by/two/deeper`]);
      expect(await listKeys(store, `${run}/by`)).toEqual([`${run}/by/one`, `${run}/by/other`, `${run}/by/two/deeper`, `${run}/byway/one`]);
      expect(await listKeys(store, `${run}/by/`)).toHaveLength(3);
      expect(await listKeys(store, `${run}/absent/`)).toEqual([]);
      expect(await listKeys(store, `${run}/absent/a`)).toEqual([]);
    });

    it('lists objects under a prefix with when each was written', async () => {
      const before = Date.now() - 2000; // S3 keeps whole seconds
      await store.put(`${run}/dated/one`, Readable.from([Buffer.from('1')]));
      const entries: Array<{ key: string; modifiedAt: Date }> = [];
      for await (const entry of store.entries(`${run}/dated/`)) entries.push(entry);
      expect(entries.map((entry) => entry.key)).toEqual([`${run}/dated/one`]);
      expect(entries[0]!.modifiedAt.getTime()).toBeGreaterThan(before);
      expect(entries[0]!.modifiedAt.getTime()).toBeLessThan(Date.now() + 2000);
      // head() tells the same age of one object.
      expect((await store.head(`${run}/dated/one`))?.modifiedAt.getTime()).toBe(entries[0]!.modifiedAt.getTime());
    });

    it('refuses keys that could escape their place', async () => {
      await expect(store.put('../escape', Readable.from([]))).rejects.toThrow(/invalid blob key/);
      await expect(store.get('a/../../b')).rejects.toThrow(/invalid blob key/);
    });
  });
}
