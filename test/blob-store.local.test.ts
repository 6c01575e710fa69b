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
});
