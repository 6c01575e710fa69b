import type Database from 'better-sqlite3';
import { type EventStore, type Position, comparePositions, positionFromString } from '../src/event-store/event-store.js';
import { type Projection, applyEvents } from './projection.js';

/** Each projection's checkpoint in a read-model store (undefined: nothing applied yet). */
export function readCheckpoints(db: Database.Database): Map<string, Position | undefined> {
  const rows = db.prepare<[], { name: string; position: string | null }>('SELECT name, position FROM projection_checkpoints').all();
  return new Map(rows.map((row) => [row.name, row.position === null ? undefined : positionFromString(row.position)]));
}

/**
 * Rebuilds the given projections into an empty store from the start of the log, each up to its
 * target position and no further, so the result can be compared with a store that stood there.
 */
export async function replayInto(
  store: EventStore,
  db: Database.Database,
  projections: readonly Projection[],
  targets: ReadonlyMap<string, Position | undefined>,
  pageSize = 2_000,
): Promise<{ events: number }> {
  for (const projection of projections) projection.create(db);
  const active = projections.filter((projection) => targets.get(projection.name) !== undefined);
  const last = active.reduce<Position | undefined>((latest, projection) => {
    const target = targets.get(projection.name)!;
    return !latest || comparePositions(target, latest) > 0 ? target : latest;
  }, undefined);
  let events = 0;
  let after: Position | undefined;
  while (last && (!after || comparePositions(after, last) < 0)) {
    const page = await store.readAll({ ...(after ? { after } : {}), maxCount: pageSize });
    if (page.length === 0) break;
    const upToLast = page.filter((event) => comparePositions(event.position, last) <= 0);
    events += upToLast.length;
    db.transaction(() => {
      for (const projection of active) {
        const target = targets.get(projection.name)!;
        applyEvents(projection, db, upToLast.filter((event) => comparePositions(event.position, target) <= 0));
      }
    })();
    after = page[page.length - 1]!.position;
  }
  return { events };
}

export interface ReadModelDifference {
  readonly table: string;
  readonly live: number;
  readonly replayed: number;
  /** The first row that differs, from each side. */
  readonly firstDifference: { live: unknown; replayed: unknown };
}

const tablesOf = (db: Database.Database): string[] =>
  db
    .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'projection_checkpoints' ORDER BY name")
    .all()
    .map((row) => row.name);

/** Table by table, row by row, both stores walked in step: memory stays flat whatever their size. */
export function compareReadModels(live: Database.Database, replayed: Database.Database): { tables: Record<string, number>; differences: ReadModelDifference[] } {
  const tables: Record<string, number> = {};
  const differences: ReadModelDifference[] = [];
  const count = (db: Database.Database, table: string) => (db.prepare(`SELECT count(*) AS n FROM "${table}"`).get() as { n: number }).n;
  const replayedTables = new Set(tablesOf(replayed));
  for (const table of [...new Set([...tablesOf(live), ...replayedTables])].sort()) {
    const liveRows = tablesOf(live).includes(table) ? count(live, table) : 0;
    const replayedRows = replayedTables.has(table) ? count(replayed, table) : 0;
    tables[table] = liveRows;
    const left = liveRows > 0 ? live.prepare(`SELECT * FROM "${table}" ORDER BY rowid`).iterate() : [][Symbol.iterator]();
    const right = replayedRows > 0 ? replayed.prepare(`SELECT * FROM "${table}" ORDER BY rowid`).iterate() : [][Symbol.iterator]();
    try {
      for (;;) {
        const a = left.next();
        const b = right.next();
        if (a.done && b.done) break;
        if (JSON.stringify(a.value) !== JSON.stringify(b.value)) {
          differences.push({ table, live: liveRows, replayed: replayedRows, firstDifference: { live: a.value ?? null, replayed: b.value ?? null } });
          break;
        }
      }
    } finally {
      left.return?.();
      right.return?.();
    }
  }
  return { tables, differences };
}
