import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { BENCH_MODEL, benchJobEnv, startUpstream } from './batch.js';
import { median, peakRssMiB } from './measurements.js';
import { stop } from '../test/support/processes.js';
import { eventTimes, startSpool } from './spool.js';
import { writeInput } from './upload.js';

const MIB = 1024 * 1024;

/**
 * The baseline: the same file read from disk, cut into lines at each newline byte, each line
 * decoded and parsed with JSON.parse, nothing else (no checks, no chunks, no events).
 */
async function bareParse(path: string): Promise<number> {
  const started = process.hrtime.bigint();
  let carry: Buffer = Buffer.alloc(0);
  let lines = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: MIB })) {
    const bytes = carry.length > 0 ? Buffer.concat([carry, chunk as Buffer]) : (chunk as Buffer);
    let from = 0;
    for (let at = bytes.indexOf(10, from); at !== -1; at = bytes.indexOf(10, from)) {
      JSON.parse(bytes.toString('utf8', from, at));
      lines += 1;
      from = at + 1;
    }
    carry = bytes.subarray(from);
  }
  if (carry.length > 0) JSON.parse(carry.toString('utf8'));
  return Number(process.hrtime.bigint() - started) / 1e9;
}

export interface ValidationResult {
  rounds: number;
  lines: number;
  megabytes: number;
  baselineMBps: number;
  spoolMBps: number;
  ratio: number;
  spoolPeakRssMiB: number;
}

/**
 * Item 4: validating a 50,000-line, 200 MB batch input (every line checked, custom_ids unique,
 * chunks cut), timed in the log from BatchCreated to BatchValidated. The batch is cancelled once
 * it runs. Baseline: reading and JSON-parsing the same file in a bare loop.
 */
export async function benchValidation(rounds = 3): Promise<ValidationResult> {
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-validation-'));
  try {
    const input = join(work, 'input.jsonl');
    const lines = 50_000;
    // 4,194 bytes a line: 209,700,000 bytes, just under the 200 MiB batch file limit.
    const size = await writeInput(input, lines, 4194, BENCH_MODEL);
    const baseline: number[] = [];
    const spool: number[] = [];
    const rss: number[] = [];
    const ratios: number[] = [];
    for (let round = 0; round < rounds; round++) {
      baseline.push(await bareParse(input));
      const upstream = await startUpstream(0, 16);
      const dataDir = mkdtempSync(join(work, 'data-'));
      try {
        const service = await startSpool(dataDir, benchJobEnv(work, upstream.url, 16));
        try {
          const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 600_000 });
          const file = await client.files.create({ file: createReadStream(input), purpose: 'batch' });
          let batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'bench-job' } as never);
          while (batch.status === 'validating') {
            await new Promise((resolve) => setTimeout(resolve, 50));
            batch = await client.batches.retrieve(batch.id);
          }
          if (batch.status !== 'in_progress') throw new Error(`the batch is ${batch.status} after validation: ${JSON.stringify(batch.errors)}`);
          if (batch.request_counts?.total !== lines) throw new Error(`validation counted ${batch.request_counts?.total} requests`);
          await client.batches.cancel(batch.id);
          while (!['cancelled', 'completed', 'failed'].includes(batch.status)) {
            await new Promise((resolve) => setTimeout(resolve, 50));
            batch = await client.batches.retrieve(batch.id);
          }
        } finally {
          rss.push(peakRssMiB(service.child.pid!));
          await stop(service.child);
        }
        const times = eventTimes(dataDir);
        const seconds = (times.get('BatchValidated')!.first - times.get('BatchCreated')!.first) / 1000;
        spool.push(seconds);
        ratios.push(baseline[round]! / seconds);
        process.stdout.write(`validation ${(size / MIB).toFixed(0)} MiB: bare parse ${(size / MIB / baseline[round]!).toFixed(0)} MiB/s, spool ${(size / MIB / seconds).toFixed(0)} MiB/s\n`);
      } finally {
        await upstream.stop();
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
    const baselineMBps = size / MIB / median(baseline);
    const spoolMBps = size / MIB / median(spool);
    return { rounds, lines, megabytes: size / MIB, baselineMBps, spoolMBps, ratio: median(ratios), spoolPeakRssMiB: median(rss) };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
