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
}
