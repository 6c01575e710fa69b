import type Database from 'better-sqlite3';
import { sequencePosition } from './row-recorded-event.js';
import {
  type AppendResult,
  type ExpectedRevision,
  IdempotencyConflictError,
  type NewEvent,
  WrongExpectedRevisionError,
} from './event-store.js';

/** A row of the embedded log's events table. */
export interface EventRow {
  position: number;
  event_id: string;
  stream_name: string;
  revision: number;
  type: string;
  data: string;
  metadata: string;
  recorded_at: number;
}

/** What one append did: its answer, whether it wrote, and the rows it inserted (none where it wrote none). */
export interface StreamAppend {
  readonly result: AppendResult;
  readonly wrote: boolean;
  readonly rows: readonly EventRow[];
}

const NO_ROWS: readonly EventRow[] = [];

/**
 * Appends to one stream inside the embedded store's open transaction, each in a savepoint of its
 * own: the expected revision checked, the events inserted, and an append sent again answered as
 * the first time (found by its event ids), so one append that fails leaves the others of its
 * group commit in.
 */
export class SqliteStreamAppender {
  private readonly statements;
  private readonly appendInSavepoint: (streamName: string, events: readonly NewEvent[], expected: ExpectedRevision, recordedAt: number) => StreamAppend;

  /** See firstWritten. */
  private firstOfCommit: number | undefined;

  /**
   * The first position written in the commit being made (its first insert, since beginCommit). An
   * insert undone with its savepoint may have set it: AUTOINCREMENT hands the same number to the
   * next insert then, so it is never past the commit's first event.
   */
  get firstWritten(): number | undefined {
    return this.firstOfCommit;
  }

  /** A group commit begins: nothing written in it yet. */
  beginCommit(): void {
    this.firstOfCommit = undefined;
  }

  constructor(db: Database.Database) {
    this.statements = {
      lastRevision: db.prepare<[string], { revision: number | null }>(
        'SELECT max(revision) AS revision FROM events WHERE stream_name = ?',
      ),
      byEventId: db.prepare<[string], EventRow>('SELECT * FROM events WHERE event_id = ?'),
      // Bound by place, not by name: an object of named parameters is read key by key on every
      // insert, and every batch line's outcome is one.
      insert: db.prepare<[string, string, number, string, string, string, number]>(
        `INSERT INTO events (event_id, stream_name, revision, type, data, metadata, recorded_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
    };
    // A transaction function called inside another runs in a savepoint.
    this.appendInSavepoint = db.transaction((streamName: string, events: readonly NewEvent[], expected: ExpectedRevision, recordedAt: number) =>
      this.appendInTransaction(streamName, events, expected, recordedAt),
    );
  }

  /** One append in its savepoint; one with an event recorded before answers as that append did (or fails as a conflict). */
  append(streamName: string, events: readonly NewEvent[], expected: ExpectedRevision, recordedAt: number): StreamAppend {
    try {
      return this.appendInSavepoint(streamName, events, expected, recordedAt);
    } catch (error) {
      if (!(error instanceof RecordedBeforeSignal)) throw error;
      const replayed = this.replayedIfRecorded(streamName, events);
      // None recorded once the savepoint is undone: the append named one id twice.
      if (!replayed) throw error.cause;
      return { result: replayed, wrote: false, rows: NO_ROWS };
    }
  }

  private appendInTransaction(
    streamName: string,
    events: readonly NewEvent[],
    expected: ExpectedRevision,
    recordedAt: number,
  ): StreamAppend {
    const last = this.statements.lastRevision.get(streamName)?.revision ?? null;
    const actual = last === null ? 'no_stream' : BigInt(last);
    const matches =
      expected === 'any' ||
      (expected === 'no_stream' && last === null) ||
      (expected === 'stream_exists' && last !== null) ||
      (typeof expected === 'bigint' && last !== null && BigInt(last) === expected);
    // An append sent again (a retry, a redelivered message) finds its stream moved on by itself:
    // the event ids, not the revision, say whether it is the same append.
    if (!matches) {
      const replayed = this.replayedIfRecorded(streamName, events);
      if (replayed) return { result: replayed, wrote: false, rows: NO_ROWS };
      throw new WrongExpectedRevisionError(streamName, expected, actual);
    }

    let revision = last === null ? 0 : last + 1;
    let position = 0;
    // A group of line outcomes shares one metadata object: written out once for all of them.
    let metadataOf: unknown;
    let metadataText: string | undefined;
    const rows: EventRow[] = [];
    try {
      for (const event of events) {
        if (metadataText === undefined || event.metadata !== metadataOf) {
          metadataOf = event.metadata;
          metadataText = JSON.stringify(event.metadata);
        }
        const data = event.serializedData ?? JSON.stringify(event.data);
        const info = this.statements.insert.run(event.id, streamName, revision, event.type, data, metadataText, recordedAt);
        position = Number(info.lastInsertRowid);
        this.firstOfCommit ??= position;
        // The row as the file now holds it: what a read of it would give (see CommittedTail).
        rows.push({ position, event_id: event.id, stream_name: streamName, revision, type: event.type, data, metadata: metadataText, recorded_at: recordedAt });
        revision += 1;
      }
    } catch (error) {
      // The unique event id, not a read of every id before the insert, finds an event recorded
      // already (a read per event was a twentieth of a batch line's main-thread time). The
      // savepoint this runs in undoes whatever this append inserted before it.
      if (!isDuplicateEventId(error)) throw error;
      throw new RecordedBeforeSignal('an event id is recorded already', { cause: error });
    }
    return { result: { nextExpectedRevision: BigInt(revision - 1), position: sequencePosition(position), repeated: false }, wrote: true, rows };
  }

  /** The answer to an append whose events are recorded already; undefined where none of them is. */
  private replayedIfRecorded(streamName: string, events: readonly NewEvent[]): AppendResult | undefined {
    const found = events.map((event) => this.statements.byEventId.get(event.id)).filter((row): row is EventRow => row !== undefined);
    return found.length > 0 ? this.replayedAppend(streamName, events, found) : undefined;
  }

  /** The same append sent again (a retry, a redelivered message): answer as the first time. */
  private replayedAppend(streamName: string, events: readonly NewEvent[], found: EventRow[]): AppendResult {
    const sameAppend =
      found.length === events.length &&
      found.every(
        (row, index) => row.stream_name === streamName && (index === 0 || row.revision === found[index - 1]!.revision + 1),
      );
    if (!sameAppend) throw new IdempotencyConflictError(streamName, found.map((row) => row.event_id));
    const last = found[found.length - 1]!;
    return { nextExpectedRevision: BigInt(last.revision), position: sequencePosition(last.position), repeated: true };
  }
}

/** Thrown inside an append's savepoint (undoing it) when one of its event ids is recorded already. */
class RecordedBeforeSignal extends Error {}

function isDuplicateEventId(error: unknown): boolean {
  return error instanceof Error && (error as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE' && error.message.includes('events.event_id');
}
