import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { packageRoot } from '../src/package-root.js';
import { startNode } from './processes.js';

export const BENCH_API_KEY = 'bench-api-key-0123456789';

export interface SpoolProcess {
  readonly child: ChildProcess;
  readonly url: string;
}

/**
 * Starts `spool serve` as its own process on a free port and waits until /ready answers 200.
 * BENCH_PROFILE=DIR runs it under `node --cpu-prof`, writing a .cpuprofile into DIR when it
 * stops (summarise one with `node dist/bench/profile-summary.js FILE`); BENCH_SPOOL_NODE_OPTIONS
 * becomes its NODE_OPTIONS (e.g. --max-old-space-size=96, to see what memory a run needs).
 */
export async function startSpool(dataDir: string, env: Record<string, string> = {}): Promise<SpoolProcess> {
  const profileDir = process.env.BENCH_PROFILE;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const { child, match } = await startNode(
    join(packageRoot, 'dist/src/cli.js'),
    ['serve'],
    { PORT: '0', DATA_DIR: dataDir, API_KEY: BENCH_API_KEY, ...(process.env.BENCH_SPOOL_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SPOOL_NODE_OPTIONS } : {}), ...env },
    /"url":"(http:\/\/[^"]+)"/,
    profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
  );
  const url = match[1]!;
  await waitForReady(url, 60_000);
  return { child, url };
}

/** Resolves once a Spool process answers /ready with 200. */
export async function waitForReady(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ready = await fetch(`${url}/ready`).catch(() => undefined);
    await ready?.arrayBuffer();
    if (ready?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${url} was not ready within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** When each event type was first and last recorded in a data directory's embedded log (ms). */
export function eventTimes(dataDir: string): Map<string, { first: number; last: number; count: number }> {
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true });
  try {
    const rows = db
      .prepare<[], { type: string; first: number; last: number; count: number }>('SELECT type, min(recorded_at) AS first, max(recorded_at) AS last, count(*) AS count FROM events GROUP BY type')
      .all();
    return new Map(rows.map((row) => [row.type, row]));
  } finally {
    db.close();
  }
}
