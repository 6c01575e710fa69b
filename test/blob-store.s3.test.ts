import { inject } from 'vitest';
import { S3BlobStore, createS3Client } from '../src/blob-store/s3-blob-store.js';
import { blobStoreContract } from './support/blob-store-contract.js';

blobStoreContract('S3 (s3rver on 127.0.0.1)', async () => {
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
  const client = createS3Client({ endpoint: inject('s3Endpoint'), forcePathStyle: true });
  // The smallest part size S3 allows, so the multipart path is taken by the larger objects.
  return new S3BlobStore(client, { bucket: inject('s3Bucket'), prefix: 'contract' }, 5 * 1024 * 1024);
});
