import { createReadStream, createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../src/platform/package-root.js';
import { median, peakRssMiB } from './measurements.js';
import { startNode, startSpoolCli, stop } from '../test/support/processes.js';

const MIB = 1024 * 1024;
const BOUNDARY = 'spool-bench-boundary';

/** A JSONL batch input of `lines` chat requests padded to `bytesPerLine`, written to disk once. */
export async function writeInput(path: string, lines: number, bytesPerLine: number, model = 'spool-tiny'): Promise<number> {
  const out = createWriteStream(path);
  for (let index = 0; index < lines; index++) {
    const head = `{"custom_id":"request-${index}","method":"POST","url":"/v1/chat/completions","body":{"model":"${model}","messages":[{"role":"user","content":"`;
    const tail = '"}]}}\n';
    const line = head + 'x'.repeat(Math.max(0, bytesPerLine - head.length - tail.length)) + tail;
    if (!out.write(line)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
  }
  await new Promise((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve(undefined))));
  return statSync(path).size;
}

/** Streams the file as a multipart upload (purpose first, then the file); resolves with seconds taken. */
function upload(url: string, path: string, size: number): Promise<number> {
  const head = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="input.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': String(head.length + size + tail.length) },
      },
      (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => {
          if (res.statusCode !== 200) reject(new Error(`upload answered ${res.statusCode}: ${body}`));
          else resolve(Number(process.hrtime.bigint() - started) / 1e9);
        });
      },
    );
    req.on('error', reject);
    req.write(head);
    const file = createReadStream(path, { highWaterMark: MIB });
    file.on('error', reject);
    file.on('end', () => req.end(tail));
    file.pipe(req, { end: false });
  });
}

/**
 * Stops the bare baseline server. One, sent SIGTERM after its upload, once stopped listening and
 * then waited on a lock in its exit for good; after 10 s it is killed (its figures are taken by then).
 */
async function stopBaseline(child: ChildProcess): Promise<void> {
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  try {
    await stop(child);
  } finally {
    clearTimeout(timer);
  }
}

export interface UploadResult {
  megabytes: number;
  rounds: number;
  baselineMBps: number;
  spoolMBps: number;
  ratio: number;
  spoolPeakRssMiB: number;
  baselinePeakRssMiB: number;
}

async function measure(path: string, size: number, rounds: number, work: string): Promise<UploadResult> {
  const baseline: number[] = [];
  const spool: number[] = [];
  const spoolRss: number[] = [];
  const baselineRss: number[] = [];
  for (let round = 0; round < rounds; round++) {
    // Side by side: each round runs the baseline and the service on the same input, back to back.
    const baseDir = mkdtempSync(join(work, 'baseline-'));
    const base = await startNode(join(packageRoot, 'dist/bench/baseline-upload-server.js'), [baseDir], {}, /listening on (\d+)/);
    baseline.push(size / MIB / (await upload(`http://127.0.0.1:${base.match[1]}/`, path, size)));
    baselineRss.push(peakRssMiB(base.child.pid!));
    await stopBaseline(base.child);
    rmSync(baseDir, { recursive: true, force: true });

    const dataDir = mkdtempSync(join(work, 'spool-'));
    const service = await startSpoolCli(['serve'], { PORT: '0', DATA_DIR: dataDir, API_KEY: 'bench-api-key-0123456789' });
    spool.push(size / MIB / (await upload(`${service.url}/v1/files`, path, size)));
    spoolRss.push(peakRssMiB(service.child.pid!));
    await stop(service.child);
    rmSync(dataDir, { recursive: true, force: true });
  }
  const baselineMBps = median(baseline);
  const spoolMBps = median(spool);
  return {
    megabytes: size / MIB,
    rounds,
    baselineMBps,
    spoolMBps,
    ratio: spoolMBps / baselineMBps,
    spoolPeakRssMiB: median(spoolRss),
    baselinePeakRssMiB: median(baselineRss),
  };
}

/** Upload throughput against a bare streaming server, and the service's peak RSS, at two sizes. */
export async function benchUpload(rounds = 3): Promise<UploadResult[]> {
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-upload-'));
  try {
    const results: UploadResult[] = [];
    for (const lines of [5_000, 50_000]) {
      const path = join(work, `input-${lines}.jsonl`);
      // 50,000 lines of 4,194 bytes: 209,700,000 bytes, just under the 200 MiB batch limit.
      const size = await writeInput(path, lines, 4194);
      results.push(await measure(path, size, rounds, work));
    }
    return results;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
