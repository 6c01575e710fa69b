import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median } from './measurements.js';
import { stop } from '../test/support/processes.js';
import { putCheckpoint, startS3 } from './s3.js';
import { BENCH_API_KEY, startSpool } from './spool.js';

const CLIENTS = 4;
const headers = { authorization: `Bearer ${BENCH_API_KEY}`, 'content-type': 'application/json' };

interface Answer {
  /** ms since the load started. */
  sent: number;
  done: number;
  ok: boolean;
}

/** The longest time between two consecutive answers (to any client) within [from, to], and the longest request overlapping it. */
function pauses(answers: readonly Answer[], from: number, to: number): { gapMs: number; latencyMs: number } {
  const ends = answers.filter((answer) => answer.done >= from && answer.done <= to).map((answer) => answer.done).sort((a, b) => a - b);
  let gapMs = 0;
  for (let index = 1; index < ends.length; index++) gapMs = Math.max(gapMs, ends[index]! - ends[index - 1]!);
  const latencyMs = Math.max(0, ...answers.filter((answer) => answer.done >= from && answer.sent <= to).map((answer) => answer.done - answer.sent));
  return { gapMs, latencyMs };
}

export interface WeightSwapResult {
  rounds: number;
  clients: number;
  requests: number;
  failed: number;
  steadyGapMs: number;
  steadyLatencyMs: number;
  reloadGapMs: number;
  reloadLatencyMs: number;
  reloadSeconds: number;
  /** The whole sync, staging included: from the upload request to the reload done. */
  syncGapMs: number;
  syncLatencyMs: number;
  syncSeconds: number;
}

/**
 * Item 6: two built-in replicas of spool-tiny under continuous /compat/v1 load from CLIENTS
 * clients; a checkpoint is staged and then reloaded replica by replica. Counts failed requests,
 * and compares the longest pause between answers (and the slowest request) during the reload
 * with the same load's steady state just before, in the same round.
 */
export async function benchWeightSwap(rounds = 3): Promise<WeightSwapResult> {
  const work = await mkdtemp(join(tmpdir(), 'spool-bench-swap-'));
  const s3 = await startS3(join(work, 's3'));
  try {
    const location = await putCheckpoint(s3, join(work, 'checkpoint'), 'seed1', ['--seed', '1', '--shards', '3']);
    const fleetFile = join(work, 'fleet.json');
    writeFileSync(fleetFile, JSON.stringify({ models: { 'spool-tiny': { replicas: [{ kind: 'builtin' }, { kind: 'builtin' }] } } }));
    const results: Array<Omit<WeightSwapResult, 'rounds' | 'clients'>> = [];
    for (let round = 0; round < rounds; round++) {
      const dataDir = join(work, `data-${round}`);
      const service = await startSpool(dataDir, { ...s3.env, FLEET_FILE: fleetFile });
      try {
        const status = async () =>
          ((await (await fetch(`${service.url}/mgmt/v1/weights/status`, { headers })).json()) as { models: Record<string, { state: string; staged: unknown; serving: { checkpoint: string | null } | null }> }).models['spool-tiny']!;
        const post = async (action: 'upload' | 'reload') => {
          const answer = await fetch(`${service.url}/mgmt/v1/weights/${action}`, { method: 'POST', headers, body: JSON.stringify({ weights: { 'spool-tiny': location } }) });
          if (answer.status !== 202) throw new Error(`weights ${action} answered ${answer.status}: ${await answer.text()}`);
        };
        const until = async (accept: (entry: Awaited<ReturnType<typeof status>>) => boolean) => {
          for (;;) {
            const entry = await status();
            if (accept(entry)) return;
            if (entry.state === 'failed' || entry.state === 'rejected') throw new Error(`weight sync ${entry.state}: ${JSON.stringify(entry)}`);
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
        };

        const answers: Answer[] = [];
        const origin = performance.now();
        let running = true;
        const load = Promise.all(
          Array.from({ length: CLIENTS }, async (_, client) => {
            for (let request = 0; running; request++) {
              const sent = performance.now() - origin;
              let ok = false;
              try {
                const response = await fetch(`${service.url}/compat/v1/chat/completions`, {
                  method: 'POST',
                  headers,
                  body: JSON.stringify({ model: 'spool-tiny', messages: [{ role: 'user', content: `Client ${client}, request ${request}` }], max_tokens: 16, temperature: 0 }),
                });
                const body = (await response.json()) as { choices?: unknown[] };
                ok = response.status === 200 && Array.isArray(body.choices);
              } catch {
                ok = false;
              }
              answers.push({ sent, done: performance.now() - origin, ok });
            }
          }),
        );
        const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
        await sleep(3000);
        const steadyEnd = performance.now() - origin;
        await post('upload');
        await until((entry) => entry.state === 'ready' && entry.staged !== null);
        const reloadStart = performance.now() - origin;
        await post('reload');
        await until((entry) => entry.state === 'ready' && entry.serving?.checkpoint === location);
        const reloadEnd = performance.now() - origin;
        await sleep(1000);
        running = false;
        await load;
        // Steady state: the second and third seconds (the first warms up).
        const steady = pauses(answers, 1000, steadyEnd);
        const reload = pauses(answers, reloadStart, reloadEnd + 200);
        const sync = pauses(answers, steadyEnd, reloadEnd + 200);
        const result = {
          requests: answers.length,
          failed: answers.filter((answer) => !answer.ok).length,
          steadyGapMs: steady.gapMs,
          steadyLatencyMs: steady.latencyMs,
          reloadGapMs: reload.gapMs,
          reloadLatencyMs: reload.latencyMs,
          reloadSeconds: (reloadEnd - reloadStart) / 1000,
          syncGapMs: sync.gapMs,
          syncLatencyMs: sync.latencyMs,
          syncSeconds: (reloadEnd - steadyEnd) / 1000,
        };
        results.push(result);
        process.stdout.write(`weight swap: ${JSON.stringify(result)}\n`);
      } finally {
        await stop(service.child);
        await rm(dataDir, { recursive: true, force: true });
      }
    }
    const pick = (name: keyof (typeof results)[number]) => median(results.map((result) => result[name]));
    return {
      rounds,
      clients: CLIENTS,
      requests: results.reduce((sum, result) => sum + result.requests, 0),
      // Failures are summed over all rounds, not a median: one is one too many.
      failed: results.reduce((sum, result) => sum + result.failed, 0),
      steadyGapMs: pick('steadyGapMs'),
      steadyLatencyMs: pick('steadyLatencyMs'),
      reloadGapMs: pick('reloadGapMs'),
      reloadLatencyMs: pick('reloadLatencyMs'),
      reloadSeconds: pick('reloadSeconds'),
      syncGapMs: pick('syncGapMs'),
      syncLatencyMs: pick('syncLatencyMs'),
      syncSeconds: pick('syncSeconds'),
    };
  } finally {
    await s3.stop();
    await rm(work, { recursive: true, force: true });
  }
}
