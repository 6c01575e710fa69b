// Rebuilding read models from the log. Run alone on a data directory:
//   node dist/bench/replay.js DATA_DIR project|read     prints {"events":N,"seconds":S}
// `project` rebuilds every read model into a fresh store with the service's Projector; `read`
// only reads the whole log (the baseline: what reading the events costs before any projection).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { ALL_PROJECTIONS } from '../projections/all-projections.js';
import { BatchesQueries } from '../projections/batches-projection.js';
import { Projector } from '../projections/projector.js';
import { openReadModelStore } from '../projections/read-model-store.js';
import { loadConfig } from '../src/config.js';
import type { Position } from '../src/event-store/event-store.js';
import { packageRoot } from '../src/platform/package-root.js';
import { openEventStore } from '../src/wiring/adapters.js';
import { median } from './measurements.js';

/** Every read model of the service, rebuilt from the start of the log into a fresh store. */
async function project(dataDir: string): Promise<{ events: number; seconds: number }> {
  const config = loadConfig({ DATA_DIR: dataDir });
  const eventStore = await openEventStore(config);
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-replay-'));
  const readModels = openReadModelStore(join(work, 'read-models.sqlite'));
  try {
    // Every read model the service projects, the audit trail's history index included.
    const projector = new Projector(eventStore, readModels, ALL_PROJECTIONS, pino({ level: 'silent' }));
    const started = process.hrtime.bigint();
    await projector.start();
    await projector.whenCaughtUp();
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    await projector.stop();
    if (new BatchesQueries(readModels, projector).list(1)?.data[0]?.status !== 'completed') throw new Error('the rebuilt read models do not hold the completed batch');
    return { events: projector.eventsApplied, seconds };
  } finally {
    await eventStore.close();
    readModels.close();
    rmSync(work, { recursive: true, force: true });
  }
}

/** The whole log read in the projector's pages, events decoded, nothing applied. */
async function read(dataDir: string): Promise<{ events: number; seconds: number }> {
  const eventStore = await openEventStore(loadConfig({ DATA_DIR: dataDir }));
  try {
    const started = process.hrtime.bigint();
    let events = 0;
    let after: Position | undefined;
    for (;;) {
      const page = await eventStore.readAll({ ...(after ? { after } : {}), maxCount: 1000 });
      if (page.length === 0) break;
      events += page.length;
      after = page[page.length - 1]!.position;
    }
    return { events, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
  } finally {
    await eventStore.close();
  }
}

export interface ReplayResult {
  rounds: number;
  events: number;
  baselineEventsPerSecond: number;
  spoolEventsPerSecond: number;
  ratio: number;
}

const run = promisify(execFile);

/**
 * Item 7: events per second rebuilding every read model from a log (a data directory whose
 * service has stopped), each round in a fresh process, beside a bare read of the same log.
 * `spool replay` rebuilds the same projections (projections/all-projections.ts) the same way,
 * then compares the result with the live store; it prints its own events per second.
 */
export async function benchReplay(dataDir: string, rounds = 3): Promise<ReplayResult> {
  const once = async (mode: 'project' | 'read') => {
    const { stdout } = await run(process.execPath, [join(packageRoot, 'dist/bench/replay.js'), dataDir, mode], { env: { PATH: process.env.PATH ?? '' } });
    return JSON.parse(stdout) as { events: number; seconds: number };
  };
  const baseline: number[] = [];
  const spool: number[] = [];
  const ratios: number[] = [];
  let events = 0;
  for (let round = 0; round < rounds; round++) {
    const bare = await once('read');
    const projected = await once('project');
    if (projected.events !== bare.events) throw new Error(`projected ${projected.events} events of ${bare.events}`);
    events = bare.events;
    baseline.push(bare.events / bare.seconds);
    spool.push(projected.events / projected.seconds);
    ratios.push(bare.seconds / projected.seconds);
    process.stdout.write(`replay ${events} events: read ${(bare.events / bare.seconds).toFixed(0)}/s, projected ${(projected.events / projected.seconds).toFixed(0)}/s\n`);
  }
  return { rounds, events, baselineEventsPerSecond: median(baseline), spoolEventsPerSecond: median(spool), ratio: median(ratios) };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [dataDir, mode] = process.argv.slice(2);
  if (!dataDir || (mode !== 'project' && mode !== 'read')) throw new Error('usage: replay.js DATA_DIR project|read');
  process.stdout.write(`${JSON.stringify(await (mode === 'project' ? project(dataDir) : read(dataDir)))}\n`);
}
