import { execFileSync } from 'node:child_process';
import { createReadStream, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { S3BlobStore } from '../../src/blob-store/s3-blob-store.js';
import { packageRoot } from '../../src/platform/package-root.js';
import { tempDir } from './service.js';

/** A checkpoint made with `spool checkpoint create`, put in the test S3 server under a prefix; returns its local folder. */
export async function stageInS3(store: S3BlobStore, prefix: string, args: string[]): Promise<string> {
  const folder = join(tempDir('ckpt'), 'out');
  execFileSync(process.execPath, [join(packageRoot, 'dist/src/process/cli.js'), 'checkpoint', 'create', '--out', folder, ...args]);
  for (const name of readdirSync(folder)) await store.put(`${prefix}/${name}`, createReadStream(join(folder, name)));
  return folder;
}
