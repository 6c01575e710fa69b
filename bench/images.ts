import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { packageRoot } from '../src/platform/package-root.js';
import { BENCH_MODEL, benchJobEnv, startUpstream, writeBatchInput } from './batch.js';
import { peakRssMiB } from './measurements.js';
import { startNode, stop } from '../test/support/processes.js';
import { startSpool } from './spool.js';

const IMAGE_BUCKET = 'bench-images';

export interface ImagesRow {
  lines: number;
  seconds: number;
  linesPerSecond: number;
  spoolPeakRssMiB: number;
  /** The most image GETs the store answered at once. */
  maxFetchesAtOnce: number;
  gibServed: number;
}

export interface ImagesResult {
  imageMiB: number;
  engineConcurrency: number;
  rows: ImagesRow[];
}

function* imageRequests(lines: number): Generator<{ custom_id: string; body: unknown }> {
  for (let index = 0; index < lines; index++) {
    yield {
      custom_id: `image-${index}`,
      body: {
        model: BENCH_MODEL,
        max_tokens: 8,
        messages: [{ role: 'user', content: [{ type: 'text', text: `What is in picture ${index}?` }, { type: 'image_url', image_url: { url: `s3://${IMAGE_BUCKET}/picture-${index}.png` } }] }],
      },
    };
  }
}

/**
 * Memory with images: batches of `lines` chat requests, each with its own `imageMiB` MiB image
 * in S3, through the whole service against an upstream that answers at once. Peak RSS should
 * not grow with the lines: images are fetched only by lines holding an engine slot.
 */
export async function benchImages(options: { lineCounts: number[]; imageMiB: number; engineConcurrency: number }): Promise<ImagesResult> {
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-images-'));
  const rows: ImagesRow[] = [];
  try {
    for (const lines of options.lineCounts) {
      const input = join(work, `input-${lines}.jsonl`);
      await writeBatchInput(input, imageRequests(lines));
      const upstream = await startUpstream(0, 64);
      const store = await startNode(join(packageRoot, 'dist/bench/image-store.js'), [String(options.imageMiB)], {}, /listening on (\d+)/);
      const storeUrl = `http://127.0.0.1:${store.match[1]}`;
      const dataDir = mkdtempSync(join(work, 'data-'));
      try {
        const service = await startSpool(dataDir, {
          ...benchJobEnv(work, upstream.url, options.engineConcurrency),
          AWS_ENDPOINT_URL_S3: storeUrl,
          S3_FORCE_PATH_STYLE: 'true',
          AWS_ACCESS_KEY_ID: 'bench',
          AWS_SECRET_ACCESS_KEY: 'bench',
          AWS_REGION: 'us-east-1',
          IMAGE_BUCKETS: IMAGE_BUCKET,
        });
        let seconds: number;
        let rss: number;
        try {
          const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 600_000 });
          const started = process.hrtime.bigint();
          const file = await client.files.create({ file: createReadStream(input), purpose: 'batch' });
          let batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'bench-job' } as never);
          while (!['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) {
            await new Promise((resolve) => setTimeout(resolve, 200));
            batch = await client.batches.retrieve(batch.id);
          }
          seconds = Number(process.hrtime.bigint() - started) / 1e9;
          if (batch.status !== 'completed' || batch.request_counts?.completed !== lines) {
            throw new Error(`the ${lines}-line image batch ended ${batch.status} with ${JSON.stringify(batch.request_counts)}: ${JSON.stringify(batch.errors)}`);
          }
        } finally {
          rss = peakRssMiB(service.child.pid!);
          await stop(service.child);
        }
        const stats = (await (await fetch(`${storeUrl}/stats`)).json()) as { served: number; bytes: number; maxActive: number };
        if (stats.served !== lines) throw new Error(`the store served ${stats.served} images for ${lines} lines`);
        const row = { lines, seconds, linesPerSecond: lines / seconds, spoolPeakRssMiB: rss, maxFetchesAtOnce: stats.maxActive, gibServed: stats.bytes / 2 ** 30 };
        process.stdout.write(`images ${lines} lines × ${options.imageMiB} MiB: ${row.linesPerSecond.toFixed(1)} lines/s, peak RSS ${rss.toFixed(0)} MiB, at most ${stats.maxActive} fetches at once\n`);
        rows.push(row);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
        await stop(store.child);
        await upstream.stop();
      }
    }
    return { imageMiB: options.imageMiB, engineConcurrency: options.engineConcurrency, rows };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
