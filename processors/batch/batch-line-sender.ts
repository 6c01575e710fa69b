import type { Logger } from 'pino';
import type { LineOutcome } from '../../src/domain/line-outcome.js';
import { stoppingCode } from '../../src/domain/batch.js';
import { type EngineListener, type EngineRequest, type EngineResponse, EngineUnavailableError, type InferenceEngine, RequestWithdrawnError } from '../../src/engine/engine.js';
import { ImageFetchError } from '../../src/engine/images/image-resolver.js';
import type { BatchRow, BatchesQueries } from '../../projections/batches-projection.js';
import { NO_TRACING, type TraceSpan, type Tracing, genAiOperation } from '../../src/observability/tracing.js';
import { type BatchLine, answeredLine, unansweredLine } from './chunk-outcome-recorder.js';
import { type LineRequest, lineRequestOf } from './line-request.js';
import type { LineListener } from './waiting-lines.js';

/**
 * Sends one batch line to its engine and says its outcome. The line is checked against the
 * batch's state just before it is sent: once a batch is cancelling or expiring no new line goes
 * out, and a line left is recorded as batch_cancelled or batch_expired.
 */
export class BatchLineSender {
  /** Each batch row's urgency (a chunk's lines share its row; a row read again is a new key). */
  private readonly urgencies = new WeakMap<BatchRow, LineUrgency>();

  constructor(
    private readonly deps: {
      queries: Pick<BatchesQueries, 'stopping'>;
      log: Pick<Logger, 'warn' | 'error'>;
      tracing?: Tracing;
      /** Whether this process is stopping: a line not sent yet is then left for the next start. */
      processStopping: () => boolean;
    },
  ) {}

  /**
   * Sends the line and tells `listener` its outcome (undefined when the process stopped before the
   * line was sent), or that it could not be sent at all; `listener.admitted` once the engine gives
   * the line a slot (or never, if it is not sent). The listener may hear before this returns.
   */
  send(batch: BatchRow, engine: InferenceEngine, line: number, text: string, chunkSpan: TraceSpan, listener: LineListener): void {
    let request: LineRequest;
    try {
      request = lineRequestOf(text);
    } catch (error) {
      return listener.failed(error);
    }
    if (this.deps.processStopping()) return listener.settled(undefined);
    const tracing = this.deps.tracing ?? NO_TRACING;
    // Without tracing, no span's attributes are made (every batch line passes here).
    if (tracing === NO_TRACING) return this.infer(batch, engine, line, request, undefined, listener);
    this.tracedInfer(batch, engine, line, request, tracing, chunkSpan, listener);
  }

  /** infer() inside the line's client span. */
  private tracedInfer(batch: BatchRow, engine: InferenceEngine, line: number, request: LineRequest, tracing: Tracing, chunkSpan: TraceSpan, listener: LineListener): void {
    const model = typeof request.body.model === 'string' ? request.body.model : batch.model;
    const operation = genAiOperation(batch.endpoint);
    // The GenAI semantic conventions' client span: one per line sent to an engine.
    const span = tracing.startBatchSpan(batch.id, `${operation} ${model}`, {
      parent: chunkSpan,
      kind: 'client',
      attributes: { 'gen_ai.operation.name': operation, 'gen_ai.request.model': model, 'spool.batch.id': batch.id, 'spool.batch.line': line, 'spool.batch.custom_id': request.custom_id },
    });
    const traced = new TracedLine(span, listener);
    this.infer(batch, engine, line, request, span.traceparent, traced, traced.heard);
  }

  /**
   * Tells `listener` the line's outcome (undefined: the process stopped first); `answered` hears
   * the engine's answer where there was one. No promise of its own: the engine tells the line's
   * LineAnswer where it can (InferenceEngine.submit), and what a line holds while it waits and
   * runs outlives young collections (bench/FINDINGS.md, 2026-12-02, morning).
   */
  private infer(
    batch: BatchRow,
    engine: InferenceEngine,
    line: number,
    request: LineRequest,
    traceparent: string | undefined,
    listener: LineListener,
    answered?: (response: EngineResponse) => void,
  ): void {
    const subject: BatchLine = { batch_id: batch.id, line, custom_id: request.custom_id };
    if (this.deps.processStopping()) return listener.settled(undefined);
    const before = this.stopped(subject);
    if (before) return listener.settled(before);
    // The batch's urgency is every line's: made once a batch row, not once a line.
    let urgency = this.urgencies.get(batch);
    if (!urgency) this.urgencies.set(batch, (urgency = lineUrgency(batch)));
    const engineRequest = new LineEngineRequest(
      batch,
      request,
      urgency,
      // The engine's concurrency limit may keep a line waiting: look at the batch (and whether
      // this process is stopping) again once admitted.
      () => {
        listener.admitted();
        return this.deps.processStopping() || this.stopped(subject) !== undefined;
      },
      traceparent,
    );
    const answer = new LineAnswer(this, batch, subject, listener, answered);
    try {
      if (engine.submit) engine.submit(engineRequest, answer);
      else engine.infer(engineRequest).then(
        (response) => answer.answered(response),
        (error: unknown) => answer.failed(error),
      );
    } catch (error) {
      answer.failed(error);
    }
  }

  /** The outcome of a line its engine answered (whatever the status). */
  answeredOutcome(batch: BatchRow, subject: BatchLine, response: EngineResponse, answered?: (response: EngineResponse) => void): LineOutcome | undefined {
    try {
      answered?.(response);
      return answeredLine(subject, response);
    } catch (error) {
      return this.unanswered(batch, subject, error);
    }
  }

  /** The outcome of a line its batch stopped before it was sent; undefined while the batch runs. */
  private stopped(subject: BatchLine): LineOutcome | undefined {
    const stopping = this.deps.queries.stopping(subject.batch_id);
    return stopping ? unansweredLine(subject, stoppingCode(stopping), `The batch was ${stopping} before this request was sent`) : undefined;
  }

  /** The outcome of a line the engine did not answer (undefined: the process stopped before it was sent). */
  unanswered(batch: BatchRow, subject: BatchLine, error: unknown): LineOutcome | undefined {
    const { line } = subject;
    if (error instanceof RequestWithdrawnError && this.deps.processStopping()) return undefined;
    if (error instanceof RequestWithdrawnError) return this.stopped(subject) ?? unansweredLine(subject, 'batch_cancelled', 'The batch stopped before this request was sent');
    // Error files are readable by anyone who knows the batch: their messages name no replica,
    // address or connection error. The detail goes to the log.
    if (error instanceof ImageFetchError) return unansweredLine(subject, 'image_fetch_failed', error.message);
    if (error instanceof EngineUnavailableError) {
      this.deps.log.warn({ batch_id: batch.id, line, reason: error.detail }, 'no engine answered a batch line');
      return unansweredLine(subject, 'engine_unavailable', error.message);
    }
    this.deps.log.error({ batch_id: batch.id, line, err: error }, 'a batch line could not be sent');
    return unansweredLine(subject, 'engine_unavailable', 'The request could not be sent to an engine');
  }
}

/** How a line's engine request ended, as the line's outcome: the engine's listener (EngineListener). */
class LineAnswer implements EngineListener {
  constructor(
    private readonly sender: BatchLineSender,
    private readonly batch: BatchRow,
    private readonly subject: BatchLine,
    private readonly listener: LineListener,
    private readonly heard: ((response: EngineResponse) => void) | undefined,
  ) {}

  answered(response: EngineResponse): void {
    this.settle(response, undefined);
  }

  failed(error: unknown): void {
    this.settle(undefined, error);
  }

  /** The line's outcome, or what kept it from having one (the chunk then fails, as a line that cannot be sent does). */
  private settle(response: EngineResponse | undefined, error: unknown): void {
    let outcome: LineOutcome | undefined;
    try {
      outcome = response ? this.sender.answeredOutcome(this.batch, this.subject, response, this.heard) : this.sender.unanswered(this.batch, this.subject, error);
    } catch (thrown) {
      return this.listener.failed(thrown);
    }
    this.listener.settled(outcome);
  }
}

/** A line's listener inside its client span: the span has the answer's attributes and ends with the line. */
class TracedLine implements LineListener {
  private response: EngineResponse | undefined;
  readonly heard = (response: EngineResponse): void => {
    this.response = response;
  };

  constructor(
    private readonly span: TraceSpan,
    private readonly listener: LineListener,
  ) {}

  admitted(): void {
    this.listener.admitted();
  }

  settled(outcome: LineOutcome | undefined): void {
    try {
      if (outcome) this.span.setAttributes(outcomeAttributes(outcome, this.response));
      if (outcome?.type === 'LineFailed') this.span.fail(outcome.data.error?.code ?? `status ${outcome.data.status_code}`);
    } catch {
      // A span's attributes never keep a line from its outcome.
    } finally {
      this.span.end();
    }
    this.listener.settled(outcome);
  }

  failed(error: unknown): void {
    this.span.end();
    this.listener.failed(error);
  }
}

/**
 * How the fleet schedules a line: by its batch's deadline, shared fairly between jobs; a batch
 * with no deadline (its job's SLA is none) runs on capacity nobody else wants.
 */
type LineUrgency = Pick<EngineRequest, 'serviceClass' | 'deadline' | 'fairnessKey' | 'fairnessGroup'>;

function lineUrgency(batch: BatchRow): LineUrgency {
  // With accounts, slots are shared between accounts first, then between an account's jobs.
  const fairness = { fairnessKey: batch.job_id, ...(batch.account_id !== null ? { fairnessGroup: batch.account_id } : {}) };
  return batch.expires_at === null ? { serviceClass: 'background', ...fairness } : { serviceClass: 'batch', deadline: batch.expires_at * 1000, ...fairness };
}

/** What an engine call's span shows of its answer, by the GenAI semantic conventions. */
function outcomeAttributes(outcome: LineOutcome, response: EngineResponse | undefined): Record<string, string | number> {
  const { data } = outcome;
  // An answer read off the main loop carries the fields read of it beside its text.
  const body = (response?.bodyFields ?? data.body) as { id?: unknown; model?: unknown } | null;
  return {
    'gen_ai.usage.input_tokens': data.usage.prompt_tokens,
    'gen_ai.usage.output_tokens': data.usage.completion_tokens,
    ...(typeof body?.id === 'string' ? { 'gen_ai.response.id': body.id } : {}),
    ...(typeof body?.model === 'string' ? { 'gen_ai.response.model': body.model } : {}),
    ...(data.status_code !== null ? { 'http.response.status_code': data.status_code } : {}),
    ...(data.request_id !== null ? { 'spool.engine.request_id': data.request_id } : {}),
  };
}

/**
 * A batch line's request to its engine. Its body is the line's: where the line's text can go out
 * as written (LineRequest.bodyText) it is parsed only if something reads it (a class, so that
 * no getter is made per line); a copy naming the job's model where the line names none.
 */
class LineEngineRequest implements EngineRequest {
  readonly endpoint: string;
  readonly bodyText: string | undefined;
  // Own fields, not getters over the urgency: a request spread into a copy (the pool's, with
  // another body) keeps them.
  readonly serviceClass: LineUrgency['serviceClass'];
  readonly deadline: number | undefined;
  readonly fairnessKey: string | undefined;
  readonly fairnessGroup: string | undefined;
  private readonly line: LineRequest;
  private readonly withModel: Record<string, unknown> | undefined;

  constructor(
    batch: BatchRow,
    line: LineRequest,
    urgency: LineUrgency,
    readonly withdraw: () => boolean,
    readonly traceparent: string | undefined,
  ) {
    this.endpoint = batch.endpoint;
    this.line = line;
    this.bodyText = line.bodyText;
    this.withModel = line.bodyText === undefined && (line.body.model === undefined || line.body.model === null) ? { ...line.body, model: batch.model } : undefined;
    this.serviceClass = urgency.serviceClass;
    this.deadline = urgency.deadline;
    this.fairnessKey = urgency.fairnessKey;
    this.fairnessGroup = urgency.fairnessGroup;
  }

  get body(): Record<string, unknown> {
    return this.withModel ?? this.line.body;
  }
}
