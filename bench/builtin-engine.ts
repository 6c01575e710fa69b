import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BuiltinEngine } from '../src/engine/builtin/builtin-engine.js';
import { DEFAULT_CHECKPOINT, createCheckpoint, loadCheckpoint } from '../src/engine/builtin/checkpoint.js';
import { Transformer } from '../src/engine/builtin/transformer.js';
import { median } from './measurements.js';
import { startSpoolCli, stop } from '../test/support/processes.js';

const BENCH_KEY = 'bench-api-key-0123456789';

export interface BuiltinResult {
  rounds: number;
  /** Generated tokens per second on one core (the engine runs on one thread). */
  generatedTokensPerSecond: number;
  /** Prompt and generated tokens per second. */
  totalTokensPerSecond: number;
  compatRequestsPerSecond: number;
  compatMedianLatencyMs: number;
  compatConcurrency: number;
}

/** The default spool-tiny model: tokens per second in process, and requests per second over /compat/v1. */
export async function benchBuiltinEngine(rounds = 3): Promise<BuiltinResult> {
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-builtin-'));
  try {
    createCheckpoint(join(work, 'ckpt'), DEFAULT_CHECKPOINT);
    const engine = new BuiltinEngine(new Transformer(loadCheckpoint(join(work, 'ckpt'))), 'spool-tiny');
    const generated: number[] = [];
    const total: number[] = [];
    for (let round = 0; round < rounds; round++) {
      let completion = 0;
      let all = 0;
      const started = process.hrtime.bigint();
      for (let request = 0; request < 20; request++) {
        const answer = (await engine.infer({ endpoint: '/v1/completions', body: { prompt: `Once upon a time, request ${request},`, max_tokens: 128, temperature: 0 } })).body as {
          usage: { completion_tokens: number; total_tokens: number };
        };
        completion += answer.usage.completion_tokens;
        all += answer.usage.total_tokens;
      }
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      generated.push(completion / seconds);
      total.push(all / seconds);
    }

    const concurrency = 4;
    const rates: number[] = [];
    const latencies: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const dataDir = mkdtempSync(join(work, 'data-'));
      const service = await startSpoolCli(['serve'], { PORT: '0', DATA_DIR: dataDir, API_KEY: BENCH_KEY });
      const url = `${service.url}/compat/v1/chat/completions`;
      const requests = 200;
      let next = 0;
      const started = process.hrtime.bigint();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < requests) {
            next += 1;
            const sent = process.hrtime.bigint();
            const response = await fetch(url, {
              method: 'POST',
              headers: { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' },
              body: JSON.stringify({ model: 'spool-tiny', messages: [{ role: 'user', content: `Hello ${next}` }], max_tokens: 16, temperature: 0 }),
            });
            await response.arrayBuffer();
            if (response.status !== 200) throw new Error(`compat answered ${response.status}`);
            latencies.push(Number(process.hrtime.bigint() - sent) / 1e6);
          }
        }),
      );
      rates.push(requests / (Number(process.hrtime.bigint() - started) / 1e9));
      await stop(service.child);
    }
    return {
      rounds,
      generatedTokensPerSecond: median(generated),
      totalTokensPerSecond: median(total),
      compatRequestsPerSecond: median(rates),
      compatMedianLatencyMs: median(latencies),
      compatConcurrency: concurrency,
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
