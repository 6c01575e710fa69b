import type Database from 'better-sqlite3';
import type { RecordedEvent } from '../src/event-store/event-store.js';

/** A read model fed by events. apply runs inside the projector's transaction and must not do I/O. */
export interface Projection {
  readonly name: string;
  /** Bump when the tables or the meaning of apply change: the read model is then rebuilt from the log. */
  readonly version: number;
  create(db: Database.Database): void;
  drop(db: Database.Database): void;
  apply(db: Database.Database, event: RecordedEvent): void;
  /**
   * Applies a page of events in log order, in one transaction: a projection that can fold
   * several events into one write (the counters a batch's line outcomes move) takes them here.
   * Without it, each event is applied on its own.
   */
  applyPage?(db: Database.Database, events: readonly RecordedEvent[]): void;
}

/** Applies events in log order to one projection, a page at once where it takes pages. */
export function applyEvents(projection: Projection, db: Database.Database, events: readonly RecordedEvent[]): void {
  if (events.length === 0) return;
  if (projection.applyPage) {
    projection.applyPage(db, events);
    return;
  }
  for (const event of events) projection.apply(db, event);
}
