import type Database from 'better-sqlite3';
import { type EventStore, type Position, comparePositions, positionFromString } from '../src/event-store/event-store.js';
import type { Projection } from './projection.js';
import { dumpReadModels } from './read-model-store.js';

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
    db.transaction(() => {
      for (const event of page) {
        if (comparePositions(event.position, last) > 0) break;
        events++;
        for (const projection of active) {
          if (comparePositions(event.position, targets.get(projection.name)!) <= 0) projection.apply(db, event);
        }
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

/** Table by table, row by row. */
export function compareReadModels(live: Database.Database, replayed: Database.Database): { tables: Record<string, number>; differences: ReadModelDifference[] } {
  const a = dumpReadModels(live);
  const b = dumpReadModels(replayed);
  const tables: Record<string, number> = {};
  const differences: ReadModelDifference[] = [];
  for (const table of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
    const left = a[table] ?? [];
    const right = b[table] ?? [];
    tables[table] = left.length;
    const length = Math.max(left.length, right.length);
    for (let index = 0; index < length; index++) {
      if (JSON.stringify(left[index]) !== JSON.stringify(right[index])) {
        differences.push({ table, live: left.length, replayed: right.length, firstDifference: { live: left[index] ?? null, replayed: right[index] ?? null } });
        break;
      }
    }
  }
  return { tables, differences };
}
