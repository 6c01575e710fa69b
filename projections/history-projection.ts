import type Database from 'better-sqlite3';
import type { EventStore, RecordedEvent } from '../src/event-store/event-store.js';
import { positionToString } from '../src/event-store/event-store.js';
import { parseStreamName } from '../src/domain/stream-names.js';
import type { Projection } from './projection.js';
import { resetAutoincrement, statement } from './read-model-store.js';

/**
 * Whose history an event belongs to: a batch (its own stream and its line-outcome streams), a
 * file, a model's weight syncs, or a webhook (its registration and every delivery attempt); jobs
 * have none.
 */
export function historySubject(streamName: string): string | undefined {
  const stream = parseStreamName(streamName);
  if (!stream || stream.kind === 'job') return undefined;
  if (stream.kind === 'batchlines') return `batch:${stream.id}`;
  if (stream.kind === 'webhookdelivery') return `webhook:${stream.id}`;
  return `${stream.kind}:${stream.id}`;
}

/**
 * An index of every event by subject, in log order: pointers (stream, revision), not copies, so
 * the audit trail reads the events themselves from the log.
 */
export const historyProjection: Projection = {
  name: 'history',
  version: 1,
  create(db) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS history (
        seq       INTEGER PRIMARY KEY AUTOINCREMENT,
        subject   TEXT NOT NULL,
        event_id  TEXT NOT NULL,
        stream    TEXT NOT NULL,
        revision  INTEGER NOT NULL,
        position  TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS history_by_subject ON history (subject, seq);
      CREATE INDEX IF NOT EXISTS history_by_event ON history (event_id);
    `);
  },
  drop(db) {
    db.exec('DROP TABLE IF EXISTS history');
    resetAutoincrement(db, 'history');
  },
  apply(db, recorded) {
    const subject = historySubject(recorded.streamName);
    if (!subject) return;
    statement(db, 'INSERT INTO history (subject, event_id, stream, revision, position) VALUES (?, ?, ?, ?, ?)').run(
      subject,
      recorded.id,
      recorded.streamName,
      Number(recorded.revision),
      positionToString(recorded.position),
    );
  },
};

interface HistoryRow {
  seq: number;
  event_id: string;
  stream: string;
  revision: number;
}

export interface HistoryPage {
  readonly events: RecordedEvent[];
  readonly hasMore: boolean;
}

/** A subject's events, a page at a time, read from the log through the history index. */
export class HistoryQueries {
  constructor(private readonly db: Database.Database, private readonly eventStore: EventStore) {}

  /** Whether the subject has a history and, when given, `after` is one of its events. */
  knows(subject: string, after?: string): boolean {
    if (after !== undefined) return this.db.prepare('SELECT 1 FROM history WHERE subject = ? AND event_id = ?').get(subject, after) !== undefined;
    return this.db.prepare('SELECT 1 FROM history WHERE subject = ? LIMIT 1').get(subject) !== undefined;
  }

  /**
   * undefined: the subject has no history, or `after` is not one of its events. `withoutLines`
   * leaves a batch's line outcomes out (its own events alone: a timeline).
   */
  async page(subject: string, limit: number, after?: string, withoutLines = false): Promise<HistoryPage | undefined> {
    let fromSeq = 0;
    if (after !== undefined) {
      const cursor = this.db.prepare<[string, string], { seq: number }>('SELECT seq FROM history WHERE subject = ? AND event_id = ?').get(subject, after);
      if (!cursor) return undefined;
      fromSeq = cursor.seq;
    } else if (!this.db.prepare('SELECT 1 FROM history WHERE subject = ? LIMIT 1').get(subject)) {
      return undefined;
    }
    const rows = this.db
      .prepare<[string, number, number], HistoryRow>(
        `SELECT seq, event_id, stream, revision FROM history WHERE subject = ? AND seq > ?${withoutLines ? " AND stream NOT LIKE 'batchlines-%'" : ''} ORDER BY seq LIMIT ?`,
      )
      .all(subject, fromSeq, limit + 1);
    const hasMore = rows.length > limit;
    const wanted = rows.slice(0, limit);
    return { events: await this.read(wanted), hasMore };
  }

  /** Reads each stream's span once, then puts the events back in log order. */
  private async read(rows: readonly HistoryRow[]): Promise<RecordedEvent[]> {
    const spans = new Map<string, { from: number; to: number }>();
    for (const row of rows) {
      const span = spans.get(row.stream);
      if (!span) spans.set(row.stream, { from: row.revision, to: row.revision });
      else {
        span.from = Math.min(span.from, row.revision);
        span.to = Math.max(span.to, row.revision);
      }
    }
    const byId = new Map<string, RecordedEvent>();
    for (const [stream, span] of spans) {
      for await (const event of this.eventStore.readStream(stream, { fromRevision: BigInt(span.from) })) {
        if (event.revision > BigInt(span.to)) break;
        byId.set(event.id, event);
      }
    }
    return rows.map((row) => {
      const event = byId.get(row.event_id);
      if (!event) throw new Error(`event ${row.event_id} of ${row.stream} is indexed but not in the log`);
      return event;
    });
  }
}
