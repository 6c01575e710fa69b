import { batchLinesStreamName } from '../domain/stream-names.js';
import { type EventStore, IdempotencyConflictError, type NewEvent, type RecordedEvent, WrongExpectedRevisionError } from '../event-store/event-store.js';
import { type LineFailedData, type LineOutcome, lineOutcomeDataJson, lineOutcomeEventIds } from '../domain/line-outcome.js';

const MAX_ATTEMPTS = 20;

/** The input line an outcome event is for: what tells a chunk's recorded lines, whatever the event's id. */
const lineOf = (event: RecordedEvent): number => (event.data as { line: number }).line;

/**
 * How many chunk streams' recorded lines are remembered between groups: more than the chunks a
 * process runs at once (twice BATCH_PARALLEL_CHUNKS at most). A chunk whose run is over is
 * forgotten at once (forget()); this bounds what runs that never say so leave behind.
 */
const REMEMBERED_CHUNKS = 64;

/** What this process knows of a chunk's stream: the lines of every event up to `revision`. */
interface KnownChunk {
  revision: bigint | undefined;
  readonly lines: Set<number>;
}

/**
 * The outcome streams of a batch, one per chunk. Recording is exactly-once per line: outcomes
 * for lines the stream already holds are dropped, whoever recorded them (a redelivered chunk, a
 * second worker, a run before a crash) and whatever their event ids (earlier versions derived
 * them from a hash; the line number is what tells). What a chunk's stream holds is remembered between
 * groups, so each group reads only the events appended since the last one (by others), not the
 * whole stream again; the append's expected revision still catches any append it did not see.
 */
export class LineOutcomeLog {
  private readonly known = new Map<string, KnownChunk>();
  /** The last batch's event id maker: a batch's lines are recorded together, so its ids' hash is worked out once. */
  private eventIds: { readonly batchId: string; readonly of: (line: number) => string } | undefined;

  constructor(
    private readonly eventStore: EventStore,
    /** Told of the outcomes this process recorded first (for the metrics). */
    private readonly onRecorded: (batchId: string, recorded: readonly LineOutcome[]) => void = () => undefined,
  ) {}

  async read(batchId: string, chunk: number): Promise<RecordedEvent[]> {
    const events: RecordedEvent[] = [];
    for await (const event of this.eventStore.readStream(batchLinesStreamName(batchId, chunk))) events.push(event);
    return events;
  }

  async settledLines(batchId: string, chunk: number): Promise<Set<number>> {
    return new Set((await this.read(batchId, chunk)).map(lineOf));
  }

  /**
   * The chunk's run here is over: what it recorded is not remembered any longer (a batch's line
   * numbers would otherwise stay in memory). Recording to it again reads its
   * stream first, as for any chunk not remembered.
   */
  forget(batchId: string, chunk: number): void {
    this.known.delete(batchLinesStreamName(batchId, chunk));
  }

  /** Records the outcomes not recorded yet; returns how many were new. */
  async record(batchId: string, chunk: number, outcomes: readonly LineOutcome[], correlationId: string): Promise<number> {
    const stream = batchLinesStreamName(batchId, chunk);
    if (this.eventIds?.batchId !== batchId) this.eventIds = { batchId, of: lineOutcomeEventIds(batchId) };
    const eventIdOf = this.eventIds.of;
    const known = this.known.get(stream) ?? { revision: undefined, lines: new Set<number>() };
    // Most recently used last: the oldest is forgotten first (and read again if it is needed).
    this.known.delete(stream);
    this.known.set(stream, known);
    if (this.known.size > REMEMBERED_CHUNKS) this.known.delete(this.known.keys().next().value!);
    for (let attempt = 1; ; attempt++) {
      for await (const event of this.eventStore.readStream(stream, known.revision === undefined ? {} : { fromRevision: known.revision + 1n })) {
        known.lines.add(lineOf(event));
        known.revision = event.revision;
      }
      const fresh: NewEvent[] = [];
      const freshOutcomes: LineOutcome[] = [];
      const taken = new Set<number>();
      // One metadata object for the group's events: they say the same.
      const metadata = { schemaVersion: 1, correlationId };
      for (const outcome of outcomes) {
        const line = outcome.data.line;
        if (known.lines.has(line) || taken.has(line)) continue;
        taken.add(line);
        freshOutcomes.push(outcome);
        // serializedData undefined where the body is parsed: the store writes the data out itself.
        fresh.push({ id: eventIdOf(line), type: outcome.type, data: outcome.data as unknown as Record<string, unknown>, serializedData: lineOutcomeDataJson(outcome.data), metadata });
      }
      if (fresh.length === 0) return 0;
      try {
        const readUpTo = known.revision;
        const appended = await this.eventStore.appendToStream(stream, fresh, { expectedRevision: readUpTo ?? 'no_stream' });
        for (const line of taken) known.lines.add(line);
        // Another writer recorded these very lines (the same derived ids) between the read above
        // and this append, which the store then answers as a repeat, at the revisions this
        // process expected perhaps: the lines are recorded, but with that writer's answers, not
        // these. None of them is this run's.
        if (appended.repeated ?? !(await this.heldAsAppended(stream, readUpTo, freshOutcomes))) return 0;
        // Advanced only when the append is exactly ours: an append answered as a repeat of
        // earlier ones may sit after events this process has not read yet.
        const next = (readUpTo ?? -1n) + BigInt(fresh.length);
        if (appended.nextExpectedRevision === next) known.revision = next;
        this.onRecorded(batchId, freshOutcomes);
        return fresh.length;
      } catch (error) {
        // Another writer appended to the chunk (some of these very lines, perhaps): read it and retry.
        if ((error instanceof WrongExpectedRevisionError || error instanceof IdempotencyConflictError) && attempt < MAX_ATTEMPTS) continue;
        throw error;
      }
    }
  }

  /**
   * For a store that cannot say whether an append was a repeat: whether the stream holds these
   * outcomes as this process made them (after the revision it had read up to), told by what differs
   * between two writers' answers for one line: the engine's request id, or where none answered, the
   * status and Spool's error.
   */
  private async heldAsAppended(stream: string, after: bigint | undefined, outcomes: readonly LineOutcome[]): Promise<boolean> {
    const byLine = new Map(outcomes.map((outcome) => [outcome.data.line, outcome.data] as const));
    for await (const event of this.eventStore.readStream(stream, after === undefined ? {} : { fromRevision: after + 1n })) {
      const held = event.data as Partial<LineFailedData>;
      const mine = byLine.get(held.line ?? -1);
      if (!mine) continue;
      const error = 'error' in mine ? mine.error : null;
      if (held.request_id !== mine.request_id || held.status_code !== mine.status_code || (held.error?.message ?? null) !== (error?.message ?? null)) return false;
    }
    return true;
  }
}
