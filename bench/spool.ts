import { type ChildProcess, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import Database from 'better-sqlite3';
import { startNode, startSpoolCli, waitForReady } from '../test/support/processes.js';

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
export async function startSpool(dataDir: string, env: Record<string, string> = {}, build?: string): Promise<SpoolProcess> {
  const processEnv = { PORT: '0', DATA_DIR: dataDir, API_KEY: BENCH_API_KEY, ...(process.env.BENCH_SPOOL_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SPOOL_NODE_OPTIONS } : {}), ...env };
  const { child, url } = await startSpoolCommand(['serve'], processEnv, build, spoolNodeArgs());
  await waitForReady(url, 60_000);
  return { child, url };
}

/**
 * node's flags for a Spool process: BENCH_SPOOL_NODE_ARGS (V8's flags that NODE_OPTIONS refuses,
 * e.g. --single-threaded-gc), and under BENCH_PROFILE=DIR a .cpuprofile of it in DIR when it stops.
 */
export function spoolNodeArgs(): string[] {
  const given = (process.env.BENCH_SPOOL_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const profileDir = process.env.BENCH_PROFILE;
  if (!profileDir) return given;
  mkdirSync(profileDir, { recursive: true });
  return [...given, '--cpu-prof', `--cpu-prof-dir=${profileDir}`];
}

/** Starts a Spool command (serve, processor, relay) of this checkout, or of `build` (BENCH_PREVIOUS_BUILD), once it says where it listens. */
export async function startSpoolCommand(args: readonly string[], env: Record<string, string>, build?: string, nodeArgs: string[] = []): Promise<SpoolProcess> {
  if (!build) return startSpoolCli(args, env, nodeArgs);
  const { child, match } = await startNode(builtCli(build), args, env, /"url":"(http:\/\/[^"]+)"/, nodeArgs);
  return { child, url: match[1]! };
}

/**
 * BENCH_PREVIOUS_BUILD: the root of another checkout of Spool, built (`npm ci && npm run build`),
 * which the benchmarks that compare builds run side by side with this one in the same run.
 */
export function previousBuild(): string | undefined {
  const root = process.env.BENCH_PREVIOUS_BUILD;
  if (!root) return undefined;
  builtCli(root);
  return root;
}

/** The commit a previous build's checkout is at (short), for the tables that show it; its folder's name where git cannot say. */
export function previousCommit(root: string): string {
  try {
    return execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return basename(root);
  }
}

/** The command-line entry of a built checkout (it moved between releases). */
function builtCli(root: string): string {
  const cli = ['dist/src/process/cli.js', 'dist/src/cli.js'].map((path) => join(root, path)).find((path) => existsSync(path));
  if (!cli) throw new Error(`BENCH_PREVIOUS_BUILD=${root}: no built Spool there (run npm ci && npm run build in it)`);
  return cli;
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
