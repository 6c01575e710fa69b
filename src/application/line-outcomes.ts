import type { BatchEvent } from '../domain/batch.js';
import { batchLinesStreamName } from '../domain/batch.js';
import type { Usage } from '../engine/engine.js';
import { type EventStore, type NewEvent, type RecordedEvent, WrongExpectedRevisionError } from '../event-store/event-store.js';
import { deterministicUuid } from '../ids.js';

export interface LineCompletedData {
  readonly batch_id: string;
  readonly line: number;
  readonly custom_id: string;
  readonly request_id: string;
  readonly status_code: number;
  readonly body: unknown;
  readonly usage: Usage;
}

export interface LineFailedData {
  readonly batch_id: string;
  readonly line: number;
  readonly custom_id: string;
  readonly request_id: string | null;
  readonly status_code: number | null;
  readonly body: unknown;
  readonly error: { readonly code: string; readonly message: string } | null;
  readonly usage: Usage;
}

export type LineOutcome = { readonly type: 'LineCompleted'; readonly data: LineCompletedData } | { readonly type: 'LineFailed'; readonly data: LineFailedData };

/** One id per input line, whatever its outcome: the first outcome recorded is the only one. */
export const lineOutcomeEventId = (batchId: string, line: number): string => deterministicUuid(`${batchId}/line/${line}`);

const MAX_ATTEMPTS = 20;

/**
 * The outcome streams of a batch, one per chunk. Recording is exactly-once per line: outcomes
 * for lines the stream already holds are dropped, whoever recorded them (a redelivered chunk, a
 * second worker, a run before a crash).
 */
export class LineOutcomeLog {
  constructor(private readonly eventStore: EventStore) {}

  async read(batchId: string, chunk: number): Promise<RecordedEvent[]> {
    const events: RecordedEvent[] = [];
    for await (const event of this.eventStore.readStream(batchLinesStreamName(batchId, chunk))) events.push(event);
    return events;
  }

  async settledLines(batchId: string, chunk: number): Promise<Set<number>> {
    return new Set((await this.read(batchId, chunk)).map((event) => (event.data as { line: number }).line));
  }

  /** Records the outcomes not recorded yet; returns how many were new. */
  async record(batchId: string, chunk: number, outcomes: readonly LineOutcome[], correlationId: string): Promise<number> {
    const stream = batchLinesStreamName(batchId, chunk);
    for (let attempt = 1; ; attempt++) {
      const existing = await this.read(batchId, chunk);
      const recorded = new Set(existing.map((event) => event.id));
      const fresh: NewEvent[] = [];
      for (const outcome of outcomes) {
        const id = lineOutcomeEventId(batchId, outcome.data.line);
        if (recorded.has(id)) continue;
        recorded.add(id);
        fresh.push({ id, type: outcome.type, data: outcome.data as unknown as Record<string, unknown>, metadata: { schemaVersion: 1, correlationId } });
      }
      if (fresh.length === 0) return 0;
      const last = existing[existing.length - 1];
      try {
        await this.eventStore.appendToStream(stream, fresh, { expectedRevision: last ? last.revision : 'no_stream' });
        return fresh.length;
      } catch (error) {
        if (error instanceof WrongExpectedRevisionError && attempt < MAX_ATTEMPTS) continue;
        throw error;
      }
    }
  }
}

