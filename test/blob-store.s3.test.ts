import { randomUUID } from 'node:crypto';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { Readable } from 'node:stream';
import { describe, expect, inject, it } from 'vitest';
import { S3BlobStore } from '../src/blob-store/s3-blob-store.js';
import { createS3Client } from '../src/platform/s3-client.js';
import { blobStoreContract, listKeys } from './support/blob-store-contract.js';

/** The smallest part size S3 allows, so the multipart path is taken by the larger objects. */
const PART_BYTES = 5 * 1024 * 1024;

function s3Client() {
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
  return createS3Client({ endpoint: inject('s3Endpoint'), forcePathStyle: true });
}

blobStoreContract('S3 (s3rver on 127.0.0.1)', async () => new S3BlobStore(s3Client(), { bucket: inject('s3Bucket'), prefix: 'contract' }, PART_BYTES));

describe('blob store: S3 only', () => {
  it('keeps its objects under its prefix in the bucket, apart from a store with another prefix', async () => {
    const client = s3Client();
    const run = randomUUID();
    const mine = new S3BlobStore(client, { bucket: inject('s3Bucket'), prefix: `prefix-${run}/a` }, PART_BYTES);
    const theirs = new S3BlobStore(client, { bucket: inject('s3Bucket'), prefix: `prefix-${run}/b` }, PART_BYTES);
    await mine.put('files/one', Readable.from([Buffer.from('one')]));

    const listed = await client.send(new ListObjectsV2Command({ Bucket: inject('s3Bucket'), Prefix: `prefix-${run}/` }));
    expect((listed.Contents ?? []).map((object) => object.Key)).toEqual([`prefix-${run}/a/files/one`]);
    expect(await listKeys(mine, 'files/')).toEqual(['files/one']);
    expect(await listKeys(theirs, 'files/')).toEqual([]);
    expect(await theirs.head('files/one')).toBeUndefined();
    expect(await mine.head('files/one')).toEqual({ size: 3, modifiedAt: expect.any(Date) });
  });
});
