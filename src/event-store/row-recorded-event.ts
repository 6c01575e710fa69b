import type { Position, RecordedEvent } from './event-store.js';

/**
 * A row of an SQL event log as the driver gives it: data and metadata as the JSON text written,
 * numbers as numbers (SQLite) or as text (PostgreSQL's bigints).
 */
export interface EventRow {
  readonly position: number | string;
  readonly event_id: string;
  readonly stream_name: string;
  readonly revision: number | string;
  readonly type: string;
  readonly data: string;
  readonly metadata: string;
  readonly recorded_at: number | string;
}

/** A position of a log numbered by one sequence: both halves are that number. */
export function sequencePosition(sequence: number | string | bigint): Position {
  const value = BigInt(sequence);
  return { commit: value, prepare: value };
}

/**
 * An event as read from an SQL log. Data and metadata are parsed when first read: several readers
 * (the projector, the relay) go through every event, and most of them look at the data of only
 * some (a line outcome carries a whole response body). A class, not an object of closures: every
 * reader of every line's event made one, and their getters' contexts were a large share of what
 * the main thread allocated per line; revision and position are made when first asked for too.
 */
export class RowRecordedEvent implements RecordedEvent {
  private parsedData: Record<string, unknown> | undefined;
  private parsedMetadata: RecordedEvent['metadata'] | undefined;
  private madePosition: Position | undefined;

  constructor(private readonly row: EventRow) {}

  get id(): string {
    return this.row.event_id;
  }
  get type(): string {
    return this.row.type;
  }
  get streamName(): string {
    return this.row.stream_name;
  }
  get recordedAt(): number {
    return Number(this.row.recorded_at);
  }
  get revision(): bigint {
    return BigInt(this.row.revision);
  }
  get position(): Position {
    return (this.madePosition ??= sequencePosition(this.row.position));
  }
  get data(): Record<string, unknown> {
    return (this.parsedData ??= JSON.parse(this.row.data) as Record<string, unknown>);
  }
  /** The data's JSON text as the log keeps it (for readers that need only part of it). */
  get serializedData(): string {
    return this.row.data;
  }
  get metadata(): RecordedEvent['metadata'] {
    return (this.parsedMetadata ??= JSON.parse(this.row.metadata) as RecordedEvent['metadata']);
  }

  /** What JSON (a log line) shows of it: the event's properties, not its row and parse caches. */
  toJSON(): RecordedEvent {
    return { id: this.id, type: this.type, data: this.data, metadata: this.metadata, streamName: this.streamName, revision: this.revision, position: this.position, recordedAt: this.recordedAt };
  }
}
