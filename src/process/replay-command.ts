import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ALL_PROJECTIONS } from '../../projections/all-projections.js';
import { type ReadModelDifference, compareReadModels, readCheckpoints, replayInto } from '../../projections/replay.js';
import { openReadModelStore } from '../../projections/read-model-store.js';
import type { Config } from '../config.js';
import { positionToString } from '../event-store/event-store.js';
import { openEventStore } from '../wiring/adapters.js';

export interface ReplayReport {
  readonly identical: boolean;
  readonly events: number;
  readonly seconds: number;
  readonly events_per_second: number;
  readonly positions: Record<string, string | null>;
  /** Rows per table in the live read models. */
  readonly tables: Record<string, number>;
  readonly differences: readonly ReadModelDifference[];
}

/**
 * Rebuilds every read model from the log into a fresh store and compares it with the live one
 * (DATA_DIR/read-models.sqlite), each read model up to the position the live one has reached.
 * The live store is read in one transaction: a running service may go on writing meanwhile.
 */
export async function replay(config: Config, options: { keepIn?: string } = {}): Promise<ReplayReport> {
  const livePath = join(config.dataDir, 'read-models.sqlite');
  if (!existsSync(livePath)) throw new Error(`no read models to compare with at ${livePath}: run spool replay with the DATA_DIR of a process that serves them`);
  const live = new Database(livePath, { readonly: true, fileMustExist: true });
  const directory = options.keepIn ?? mkdtempSync(join(tmpdir(), 'spool-replay-'));
  const fresh = openReadModelStore(join(directory, 'read-models.sqlite'));
  const store = await openEventStore(config);
  try {
    let report: ReplayReport | undefined;
    // Checkpoints and rows from one snapshot of the live store; replaying while holding it keeps
    // the snapshot (WAL readers never block the writer).
    live.prepare('BEGIN').run();
    try {
      const targets = readCheckpoints(live);
      const started = process.hrtime.bigint();
      const { events } = await replayInto(store, fresh, ALL_PROJECTIONS, targets);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const { tables, differences } = compareReadModels(live, fresh);
      report = {
        identical: differences.length === 0,
        events,
        seconds,
        events_per_second: seconds > 0 ? Math.round(events / seconds) : events,
        positions: Object.fromEntries([...targets].map(([name, position]) => [name, position ? positionToString(position) : null])),
        tables,
        differences,
      };
    } finally {
      live.prepare('COMMIT').run();
    }
    return report;
  } finally {
    live.close();
    fresh.close();
    await store.close();
    if (!options.keepIn) rmSync(directory, { recursive: true, force: true });
  }
}
