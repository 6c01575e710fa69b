import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { startSpoolCli, waitForReady } from '../test/support/processes.js';

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
  const { child, url } = await startSpoolCli(
    ['serve'],
    { PORT: '0', DATA_DIR: dataDir, API_KEY: BENCH_API_KEY, ...(process.env.BENCH_SPOOL_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SPOOL_NODE_OPTIONS } : {}), ...env },
    profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
  );
  await waitForReady(url, 60_000);
  return { child, url };
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
