import type { LineOutcomeLog } from '../../src/application/line-outcomes.js';
import { outputLine } from '../../src/domain/batch-output.js';
import { type LineOutcome, ZERO_USAGE } from '../../src/domain/line-outcome.js';
import { type EngineResponse, usageOf } from '../../src/engine/engine.js';
import type { ChunkRow } from '../../projections/batches-projection.js';
import { RenderedLines, type RenderedParts } from './rendered-lines.js';

export type { RenderedParts } from './rendered-lines.js';

/** Outcomes are recorded in groups: one durable append per group, not per line. */
const FLUSH_LINES = 256;
const FLUSH_MS = 200;

/** What every outcome of a batch line names. */
export interface BatchLine {
  readonly batch_id: string;
  readonly line: number;
  readonly custom_id: string;
}

/**
 * The outcome of a line the engine answered: completed below status 400, failed at or above it,
 * with the engine's own body (and no error of Spool's: the body says what went wrong).
 */
export function answeredLine(line: BatchLine, response: EngineResponse): LineOutcome {
  const usage = usageOf(response.bodyFields ?? response.body);
  const servedBy = response.servedBy ? { served_by: response.servedBy } : {};
  if (response.statusCode < 400) {
    return { type: 'LineCompleted', data: { ...line, request_id: response.requestId, status_code: response.statusCode, ...servedBy, body: response.body, usage } };
  }
  return { type: 'LineFailed', data: { ...line, request_id: response.requestId, status_code: response.statusCode, ...servedBy, body: response.body, error: null, usage } };
}

/** The outcome of a line that got no answer (not sent, or no engine answered): Spool's code and message. */
export function unansweredLine(line: BatchLine, code: string, message: string): LineOutcome {
  return { type: 'LineFailed', data: { ...line, request_id: null, status_code: null, body: null, error: { code, message }, usage: ZERO_USAGE } };
}

/**
 * Records the line outcomes of the chunks one runner holds. Each chunk's run begins by reading
 * which of its lines have an outcome already (whoever recorded them: a redelivered chunk runs only
 * the others), and its outcomes are appended in groups, every chunk's on one timer.
 */
export class ChunkOutcomeRecording {
  private readonly flushes = new FlushClock();

  constructor(
    private readonly log: LineOutcomeLog,
    private readonly correlationId: string,
  ) {}

  /**
   * A run of the chunk, knowing the lines settled before it; close it when the run ends.
   * `renderParts`: keep each line's output or error file line as it is recorded, for the chunk's
   * parts (see renderedParts()).
   */
  async begin(chunk: ChunkRow, options: { renderParts?: boolean; servedBy?: boolean } = {}): Promise<ChunkOutcomeRecorder> {
    const settled = await this.log.settledLines(chunk.batch_id, chunk.chunk);
    return new ChunkOutcomeRecorder(this.log, chunk, settled, this.flushes, this.correlationId, options.renderParts === true && settled.size === 0, options.servedBy === true);
  }
}

/** One run's outcomes of one chunk: collected, and recorded in groups, one append at a time. */
export class ChunkOutcomeRecorder {
  private pending: LineOutcome[] = [];
  private writing: Promise<unknown> = Promise.resolve();
  private failure: unknown;
  private added = false;
  private readonly flushNow = () => this.flush();
  /**
   * Each line's rendered output or error file line, by its place in the chunk, while every
   * outcome the run recorded went into the log as this run's (no other writer had a line of it
   * first); undefined once one did not, or when not asked for.
   */
  private rendered: RenderedLines | undefined;

  constructor(
    private readonly log: LineOutcomeLog,
    private readonly chunk: ChunkRow,
    private readonly settled: ReadonlySet<number>,
    private readonly clock: FlushClock,
    private readonly correlationId: string,
    renderParts = false,
    /** Its batch asks for `served_by` in its output lines. */
    private readonly servedBy = false,
  ) {
    if (renderParts) this.rendered = new RenderedLines();
  }

  /** Every line of the chunk had its outcome before the run: there is nothing to send. */
  get complete(): boolean {
    return this.settled.size >= this.chunk.lines;
  }

  /** Whether the line had no outcome when the run began, so the run sends it. */
  awaits(line: number): boolean {
    return !this.settled.has(line);
  }

  /** Whether the run added an outcome (it had lines to record). */
  get recorded(): boolean {
    return this.added;
  }

  add(outcome: LineOutcome): void {
    this.added = true;
    if (this.rendered) {
      const failed = outcome.type === 'LineFailed';
      this.rendered.set(outcome.data.line - this.chunk.first_line, failed, outputLine(this.chunk.batch_id, failed ? 'error' : 'output', outcome.data, this.servedBy)!);
    }
    this.pending.push(outcome);
    if (this.pending.length >= FLUSH_LINES) this.flush();
    else this.clock.schedule(this.flushNow);
  }

  private flush(): void {
    this.clock.cancel(this.flushNow);
    if (this.pending.length === 0) return;
    const group = this.pending;
    this.pending = [];
    this.writing = this.writing
      .then(async () => {
        const recorded = await this.log.record(this.chunk.batch_id, this.chunk.chunk, group, this.correlationId);
        // Some line of the group was another writer's first: the log, not this run, says what
        // its parts hold (they are then rendered from the log).
        if (recorded !== group.length) this.rendered = undefined;
      })
      .catch((error: unknown) => {
        this.failure ??= error;
      });
  }

  /**
   * After close(): the chunk's parts as the log's outcomes render them, when this run recorded
   * the outcome of every line of the chunk itself; undefined otherwise (render them from the log).
   * The same bytes as rendering the recorded events: outputLine of the same data.
   */
  renderedParts(): RenderedParts | undefined {
    const rendered = this.rendered;
    if (!rendered || this.failure) return undefined;
    // By place in the chunk, so in line order; blank input lines (which have no outcome) leave holes.
    return rendered.lines === this.chunk.lines ? rendered.parts() : undefined;
  }

  /** Records what is left, then forgets the chunk's stream; throws the first append that failed. */
  async close(): Promise<void> {
    this.flush();
    await this.writing;
    this.log.forget(this.chunk.batch_id, this.chunk.chunk);
    if (this.failure) throw this.failure;
  }
}

/**
 * One timer for the outcome groups of every chunk a runner holds: their flushes fall in one turn
 * of the event loop, where the embedded log commits their appends together (one fsync for all).
 * With a timer per chunk, 8 chunks made 8 commits where one does. A group still waits at most
 * FLUSH_MS.
 */
class FlushClock {
  private readonly due = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;

  schedule(flush: () => void): void {
    this.due.add(flush);
    this.timer ??= setTimeout(() => this.tick(), FLUSH_MS);
  }

  cancel(flush: () => void): void {
    this.due.delete(flush);
  }

  private tick(): void {
    this.timer = undefined;
    const due = [...this.due];
    this.due.clear();
    for (const flush of due) flush();
  }
}
