import { execFileSync } from 'node:child_process';
import { createReadStream, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import { S3BlobStore } from '../src/blob-store/s3-blob-store.js';
import { createS3Client } from '../src/platform/s3-client.js';
import { packageRoot } from '../src/platform/package-root.js';
import { startNode, stop } from '../test/support/processes.js';

export const BENCH_BUCKET = 'bench';
const CREDENTIALS = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1' };

export interface S3Server {
  readonly endpoint: string;
  readonly client: S3Client;
  /** What spool needs in its environment to reach this server. */
  readonly env: Record<string, string>;
  stop(): Promise<void>;
}

/** s3rver in its own process, objects kept under `directory`. */
export async function startS3(directory: string): Promise<S3Server> {
  const { child, match } = await startNode(join(packageRoot, 'dist/bench/s3-server.js'), [directory, BENCH_BUCKET], {}, /listening on (\d+)/);
  const endpoint = `http://127.0.0.1:${match[1]}`;
  // The AWS SDK in this process reads its credentials from the environment.
  Object.assign(process.env, CREDENTIALS);
  return {
    endpoint,
    client: createS3Client({ endpoint, forcePathStyle: true }),
    env: { ...CREDENTIALS, AWS_ENDPOINT_URL_S3: endpoint, S3_FORCE_PATH_STYLE: 'true' },
    stop: () => stop(child),
  };
}

/** `spool checkpoint create` into `folder`, then every file put under s3://bench/checkpoints/<name>/; returns that location. */
export async function putCheckpoint(s3: S3Server, folder: string, name: string, args: string[]): Promise<string> {
  execFileSync(process.execPath, [join(packageRoot, 'dist/src/process/cli.js'), 'checkpoint', 'create', '--out', folder, ...args], { stdio: 'ignore' });
  const store = new S3BlobStore(s3.client, { bucket: BENCH_BUCKET, prefix: 'checkpoints' });
  for (const file of readdirSync(folder)) await store.put(`${name}/${file}`, createReadStream(join(folder, file)));
  return `s3://${BENCH_BUCKET}/checkpoints/${name}/`;
}
