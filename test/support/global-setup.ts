import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A real S3-compatible server (s3rver) on 127.0.0.1, started for this test run. */
    s3Endpoint: string;
    s3Bucket: string;
  }
}

export const S3_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/** Starts what the suites talk to over real connections: an S3-compatible server on loopback. */
export default async function setup(project: TestProject) {
  const directory = mkdtempSync(join(tmpdir(), 'spool-s3-'));
  const bucket = 'spool-test';
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
  const { port } = await server.run();
  project.provide('s3Endpoint', `http://127.0.0.1:${port}`);
  project.provide('s3Bucket', bucket);
  return async () => {
    await server.close();
    rmSync(directory, { recursive: true, force: true });
  };
}
