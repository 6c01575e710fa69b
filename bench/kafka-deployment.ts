import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { type KafkaBroker, startKafkaBroker } from '../test/support/kafka-broker.js';
import { cpuSeconds, peakRssMiB } from './measurements.js';
import { stop, waitForReady } from '../test/support/processes.js';
import { BENCH_API_KEY, spoolNodeArgs, startSpoolCommand } from './spool.js';

/** The roles of the scaled-out shape, each its own process, as deploy/ runs them. */
const ROLES: Array<{ name: string; args: string[] }> = [
  { name: 'relay', args: ['relay'] },
  { name: 'validator', args: ['processor', 'validator'] },
  { name: 'inference-1', args: ['processor', 'inference'] },
  { name: 'inference-2', args: ['processor', 'inference'] },
  { name: 'finalizer', args: ['processor', 'finalizer'] },
];

export interface KafkaDeployment {
  readonly url: string;
  readonly apiPid: number;
  /** Each process's URL (its /ready and /metrics), by role name. */
  readonly urls: Readonly<Record<string, string>>;
  /** Work messages handled by each inference processor. */
  inferenceHandled(): Promise<number[]>;
  /** Peak RSS of every process, MiB. */
  peakRss(): Record<string, number>;
  /** CPU time every process has used so far (user + system, every thread), seconds, by role name. */
  cpuSeconds(): Record<string, number>;
  stop(): Promise<void>;
}

/**
 * Spool on Kafka: a broker of its own (KRaft, loopback), the API, the relay, a validator, a
 * finalizer and two inference processors as separate processes, sharing an embedded event log
 * file and a blob directory under `dataDir` (one machine; EventStoreDB and S3 would take their
 * place across machines). The engine concurrency is split between the inference processors, so
 * that the upstream sees at most `concurrency` requests, as with the embedded default. `build`: every
 * process from that built checkout instead of this one (BENCH_PREVIOUS_BUILD).
 */
export async function startKafkaDeployment(dataDir: string, env: Record<string, string>, concurrency: number, broker: KafkaBroker, build?: string): Promise<KafkaDeployment> {
  const shared = {
    ...env,
    PORT: '0',
    API_KEY: BENCH_API_KEY,
    LOG_LEVEL: 'info',
    // The embedded log in a file they share, unless the caller names another store (PostgreSQL).
    EVENTSTORE_URL: env.EVENTSTORE_URL ?? `file:${join(dataDir, 'events.sqlite')}`,
    BLOB_STORE: `file:${join(dataDir, 'blobs')}`,
    KAFKA_BROKERS: broker.brokers,
    KAFKA_SESSION_TIMEOUT_MS: '10000',
  };
  const children = new Map<string, { child: ChildProcess; url: string }>();
  const start = async (name: string, args: string[], extra: Record<string, string> = {}) => {
    const { child, url } = await startSpoolCommand(args, { ...shared, ...extra, DATA_DIR: join(dataDir, name) }, build, spoolNodeArgs());
    children.set(name, { child, url });
  };
  const ready = async (name: string) => (await (await fetch(`${children.get(name)!.url}/ready`)).json()) as { processors?: { inference?: { handled: number; partitions?: number[] } } };
  const stopAll = async () => {
    await Promise.all([...children.values()].map(({ child }) => stop(child)));
  };
  try {
    await start('api', ['serve']);
    const perProcess = String(Math.max(1, Math.floor(concurrency / 2)));
    await Promise.all(ROLES.map((role) => start(role.name, role.args, role.name.startsWith('inference') ? { ENGINE_CONCURRENCY: perProcess } : {})));
    for (const { url } of children.values()) await waitForReady(url, 120_000);
    await settledInferenceGroup((name) => ready(name));
  } catch (error) {
    await stopAll();
    throw error;
  }
  return {
    url: children.get('api')!.url,
    apiPid: children.get('api')!.child.pid!,
    urls: Object.fromEntries([...children].map(([name, { url }]) => [name, url])),
    inferenceHandled: async () => Promise.all(['inference-1', 'inference-2'].map(async (name) => (await ready(name)).processors?.inference?.handled ?? 0)),
    peakRss: () => Object.fromEntries([...children].map(([name, { child }]) => [name, peakRssMiB(child.pid!)])),
    cpuSeconds: () => Object.fromEntries([...children].map(([name, { child }]) => [name, cpuSeconds(child.pid!)])),
    stop: stopAll,
  };
}

export { startKafkaBroker };

/**
 * Waits until the two inference processors hold the inference partitions between them, half each,
 * and have for three readings in a row: a group still settling when the batch starts moves
 * partitions, and the chunks under way on them are run again (their lines sent to the upstream a
 * second time, which the benchmark's count of requests served then reports).
 */
async function settledInferenceGroup(ready: (name: string) => Promise<{ processors?: { inference?: { partitions?: number[] } } }>): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last = '';
  let same = 0;
  for (;;) {
    const held = await Promise.all(['inference-1', 'inference-2'].map(async (name) => (await ready(name)).processors?.inference?.partitions ?? []));
    const split = held[0]!.length > 0 && held[0]!.length === held[1]!.length && new Set(held.flat()).size === held[0]!.length * 2;
    const seen = JSON.stringify(held);
    same = split && seen === last ? same + 1 : split ? 1 : 0;
    last = seen;
    if (same >= 3) return;
    if (Date.now() > deadline) throw new Error(`the inference group did not settle within a minute: ${seen}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
