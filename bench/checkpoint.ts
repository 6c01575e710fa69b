import { writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { median, peakRssMiB } from './measurements.js';
import { stop } from '../test/support/processes.js';
import { BENCH_BUCKET, putCheckpoint, startS3 } from './s3.js';
import { BENCH_API_KEY, startSpool } from './spool.js';

const MIB = 1024 * 1024;
/** As the service's checkpoint source transfers: 8 MiB ranged GETs, 4 at a time. */
const PART_BYTES = 8 * MIB;
const PARALLEL = 4;

/**
 * The baseline: every object under the prefix copied into `folder` with ranged GETs, PARALLEL at
 * a time across all files, each part written at its offset, each file fsynced. No checks.
 */
async function rawCopy(client: S3Client, prefix: string, folder: string): Promise<{ seconds: number; bytes: number }> {
  const started = process.hrtime.bigint();
  await mkdir(folder, { recursive: true });
  const listed = await client.send(new ListObjectsV2Command({ Bucket: BENCH_BUCKET, Prefix: prefix }));
  const objects = (listed.Contents ?? []).map((object) => ({ key: object.Key!, bytes: object.Size ?? 0 }));
  const files = await Promise.all(objects.map(async (object) => ({ ...object, handle: await open(join(folder, object.key.slice(prefix.length)), 'w') })));
  const parts = files.flatMap((file) => {
    const list: Array<{ file: (typeof files)[number]; start: number; end: number }> = [];
    for (let start = 0; start < file.bytes; start += PART_BYTES) list.push({ file, start, end: Math.min(file.bytes, start + PART_BYTES) - 1 });
    return list;
  });
  let next = 0;
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (next < parts.length) {
        const part = parts[next++]!;
        const answer = await client.send(new GetObjectCommand({ Bucket: BENCH_BUCKET, Key: part.file.key, Range: `bytes=${part.start}-${part.end}` }));
        const chunks: Buffer[] = [];
        for await (const chunk of answer.Body as AsyncIterable<Buffer>) chunks.push(chunk);
        const bytes = Buffer.concat(chunks);
        await part.file.handle.write(bytes, 0, bytes.length, part.start);
      }
    }),
  );
  for (const file of files) {
    await file.handle.sync();
    await file.handle.close();
  }
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9, bytes: objects.reduce((sum, object) => sum + object.bytes, 0) };
}

export interface CheckpointResult {
  rounds: number;
  megabytes: number;
  files: number;
  baselineMBps: number;
  spoolMBps: number;
  ratio: number;
  spoolPeakRssMiB: number;
}

/**
 * Item 5: staging a multi-shard checkpoint of over 1 GB from a local S3-compatible server
 * (POST /mgmt/v1/weights/upload until the status shows it staged: header validation, transfer,
 * sha256 of every file, WeightsStaged), against a raw parallel ranged-GET copy of the same objects.
 * The model is served by an HTTP replica, so no serving checkpoint of that size has to be loaded.
 */
export async function benchCheckpoint(rounds = 3): Promise<CheckpointResult> {
  const work = await mkdtemp(join(tmpdir(), 'spool-bench-checkpoint-'));
  const s3 = await startS3(join(work, 's3'));
  try {
    // 4 layers of hidden size 2048 in f32, in 8 shards: about 1.07 GB.
    const location = await putCheckpoint(s3, join(work, 'checkpoint'), 'big', ['--seed', '7', '--hidden', '2048', '--layers', '4', '--shards', '8']);
    await rm(join(work, 'checkpoint'), { recursive: true, force: true });
    const prefix = 'checkpoints/big/';
    const fleetFile = join(work, 'fleet.json');
    // An HTTP replica that is never called: staging does not touch the replicas.
    writeFileSync(fleetFile, JSON.stringify({ models: { 'bench-big': { replicas: [{ kind: 'vllm', base_url: 'http://127.0.0.1:9/v1' }] } } }));
    const headers = { authorization: `Bearer ${BENCH_API_KEY}`, 'content-type': 'application/json' };

    const baseline: number[] = [];
    const spool: number[] = [];
    const rss: number[] = [];
    const ratios: number[] = [];
    let bytes = 0;
    let files = 0;
    for (let round = 0; round < rounds; round++) {
      const copy = await rawCopy(s3.client, prefix, join(work, 'raw'));
      bytes = copy.bytes;
      baseline.push(copy.seconds);
      await rm(join(work, 'raw'), { recursive: true, force: true });

      const dataDir = join(work, `data-${round}`);
      const service = await startSpool(dataDir, { ...s3.env, FLEET_FILE: fleetFile });
      try {
        const started = process.hrtime.bigint();
        const accepted = await fetch(`${service.url}/mgmt/v1/weights/upload`, { method: 'POST', headers, body: JSON.stringify({ weights: { 'bench-big': location } }) });
        if (accepted.status !== 202) throw new Error(`weights upload answered ${accepted.status}: ${await accepted.text()}`);
        for (;;) {
          const entry = ((await (await fetch(`${service.url}/mgmt/v1/weights/status`, { headers })).json()) as { models: Record<string, { state: string; staged: { files: unknown[] } | null; last_error?: unknown }> }).models['bench-big']!;
          if (entry.staged) {
            files = entry.staged.files.length;
            break;
          }
          if (entry.state !== 'uploading') throw new Error(`weight sync ended ${entry.state}: ${JSON.stringify(entry)}`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        spool.push(Number(process.hrtime.bigint() - started) / 1e9);
      } finally {
        rss.push(peakRssMiB(service.child.pid!));
        await stop(service.child);
        await rm(dataDir, { recursive: true, force: true });
      }
      ratios.push(baseline[round]! / spool[round]!);
      process.stdout.write(`checkpoint ${(bytes / MIB).toFixed(0)} MiB: raw copy ${(bytes / MIB / baseline[round]!).toFixed(0)} MiB/s, spool ${(bytes / MIB / spool[round]!).toFixed(0)} MiB/s\n`);
    }
    const baselineMBps = bytes / MIB / median(baseline);
    const spoolMBps = bytes / MIB / median(spool);
    return { rounds, megabytes: bytes / MIB, files, baselineMBps, spoolMBps, ratio: median(ratios), spoolPeakRssMiB: median(rss) };
  } finally {
    await s3.stop();
    await rm(work, { recursive: true, force: true });
  }
}
