import { readdirSync } from 'node:fs';
import { Readable } from 'node:stream';
import { describe, expect, inject, it } from 'vitest';
import { LocalBlobStore } from '../src/blob-store/local-blob-store.js';
import { S3BlobStore, createS3Client } from '../src/blob-store/s3-blob-store.js';
import { blobStoreContract } from './support/blob-store-contract.js';
import { tempDir } from './support/service.js';

blobStoreContract('local directory', async () => new LocalBlobStore(tempDir('blobs')));

blobStoreContract('S3 (s3rver on 127.0.0.1)', async () => {
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
  const client = createS3Client({ endpoint: inject('s3Endpoint'), forcePathStyle: true });
  // The smallest part size S3 allows, so the multipart path is taken by the larger objects.
  return new S3BlobStore(client, { bucket: inject('s3Bucket'), prefix: 'contract' }, 5 * 1024 * 1024);
});

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
