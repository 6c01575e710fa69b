import type { ChildProcess } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSpoolCli } from './processes.js';
import { TEST_API_KEY, s3Env } from './service.js';

/** What every process of a scaled-out test shares; EVENTSTORE_URL named for `spool replay` after. */
export type ScaleOutEnv = Record<string, string> & { readonly EVENTSTORE_URL: string };

/**
 * The settings every Spool process of a scaled-out test runs with: the shared event log, a prefix
 * of its own in the test run's S3-compatible bucket, the Kafka broker (4 partitions, a short session
 * so a killed member leaves soon), the stand-in engine, and chunks small enough that a batch of a
 * few hundred lines spreads over every inference processor.
 */
export function scaleOutEnv(options: { eventStoreUrl: string; s3Prefix: string; brokers: string; engineUrl: string }): ScaleOutEnv {
  return {
    HOST: '127.0.0.1',
    PORT: '0',
    API_KEY: TEST_API_KEY,
    LOG_LEVEL: 'info',
    EVENTSTORE_URL: options.eventStoreUrl,
    ...s3Env(options.s3Prefix),
    KAFKA_BROKERS: options.brokers,
    KAFKA_SESSION_TIMEOUT_MS: '6000',
    KAFKA_PARTITIONS: '4',
    ENGINE_BASE_URL: options.engineUrl,
    ENGINE_CONCURRENCY: '4',
    ENGINE_BACKOFF_MS: '20',
    BATCH_CHUNK_LINES: '10',
    BATCH_PARALLEL_CHUNKS: '4',
  };
}

/**
 * The processes of the scaled-out shape on PostgreSQL, by name, with their `spool` arguments: two
 * API processes, the relay, a validator, two inference processors and a finalizer. `api-1` starts
 * first (it reserves the tests' job); the others then start together.
 */
export const SCALE_OUT_ROLES: Readonly<Record<string, readonly string[]>> = {
  'api-1': ['serve'],
  'api-2': ['serve'],
  relay: ['relay'],
  validator: ['processor', 'validator'],
  'inference-1': ['processor', 'inference'],
  'inference-2': ['processor', 'inference'],
  finalizer: ['processor', 'finalizer'],
};

/** Starts one role as its own process, its data under root/name and its output in logs/name.log (read when a test fails). */
export async function startLoggedRole(name: string, args: readonly string[], env: Record<string, string>, dirs: { root: string; logs: string }, launcher: string[] = []): Promise<{ child: ChildProcess; url: string }> {
  const { child, url } = await startSpoolCli(args, { ...env, DATA_DIR: join(dirs.root, name) }, [], launcher);
  const logFile = join(dirs.logs, `${name}.log`);
  child.stdout?.on('data', (chunk: Buffer) => appendFileSync(logFile, chunk));
  child.stderr?.on('data', (chunk: Buffer) => appendFileSync(logFile, chunk));
  return { child, url };
}
