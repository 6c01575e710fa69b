import type { TextDelta } from './builtin/builtin-engine.js';
import { type EngineListener, type EngineRequest, type EngineResponse, EngineUnavailableError, RequestWithdrawnError, StreamCutError, withBody } from './engine.js';
import { ImageFetchError, type ImageResolver } from './images/image-resolver.js';
import type { ReplicaListener, ReplicaResponse } from './replica.js';
import type { ReplicaMember } from './replica-member.js';
import type { ServedBy } from '../domain/line-outcome.js';
import type { RequestOutcome } from './scheduling/capacity-window.js';
import { slotsForWaitingWork } from './scheduling/hold-ahead.js';
import type { ServiceClass, WorkItem } from './scheduling/scheduler.js';
import { backoffDelay } from '../platform/retry.js';

/** What a PooledRequest needs of its pool (replica-pool.ts). */
export interface RequestPool {
  readonly model: string;
  readonly maxAttempts: number;
  readonly backoffMs: number;
  readonly images: ImageResolver | undefined;
  /** A new id for the scheduler: one per attempt. */
  newId(): string;
  /** Queues the request for a slot and starts whatever may start now (PooledRequest.admit when it is its turn). */
  enqueue(request: PooledRequest): void;
  /** Takes the request out of the queue; false where it was not waiting (admitted meanwhile). */
  withdraw(request: PooledRequest): boolean;
  member(replicaId: string): ReplicaMember;
  /** Requests of each class in flight on the replica now, itself included once admitted (read at once, not kept). */
  inFlightOn(replicaId: string): Readonly<Record<ServiceClass, number>>;
  /** The member's part of the slots kept free for interactive requests now. */
  reservedOn(member: ReplicaMember): number;
  /** An attempt is over: its slot is free, its result learned from, and whatever may start now starts. */
  attemptEnded(request: PooledRequest, member: ReplicaMember): void;
}

const overloaded = (status: number) => status === 429 || status === 503;
export const transient = (response: EngineResponse) => response.statusCode === 429 || response.statusCode >= 500;

/**
 * One request through a pool: it waits in the scheduler's queue (it is the queue's work item),
 * goes to the replica it is admitted to, and is tried again on another after a transient
 * failure, with backoff, up to the pool's attempts. One object a request, its state in fields,
 * rather than an async function awaiting a slot promise at each attempt: every batch line passes
 * here, and the frames, promises and closures of that path were about a tenth of what a line
 * allocates on the main thread, much of it alive while the line waits and so promoted to the
 * old generation (bench/FINDINGS.md, 2026-12-02, morning).
 */
export class PooledRequest implements WorkItem, ReplicaListener {
  id: string;
  readonly serviceClass: ServiceClass;
  readonly deadline: number | undefined;
  readonly fairnessKey: string | undefined;
  readonly fairnessGroup: string | undefined;
  /** Replicas that failed it: tried again elsewhere first. Made at the first failed attempt (most requests are answered at the first). */
  avoid: Set<string> | undefined;
  // The attempt under way, as the pool learns from it once it ends (attemptEnded).
  /** The engine answered this attempt (whatever its status). */
  engineAnswered = false;
  outcome: RequestOutcome = 'failed';
  startedAt = 0;
  /** Requests on the replica when it was admitted, itself included, and of them interactive ones. */
  inFlight = 0;
  interactive = 0;
  reserved = 0;
  limit = 0;
  engineLatencyMs: number | undefined;
  sent: ReplicaResponse['sent'];

  private attempt = 0;
  private lastResponse: EngineResponse | undefined;
  private lastError = 'no attempt made';
  private retryAfterMs: number | undefined;
  private member: ReplicaMember | undefined;
  /** This attempt's replica tells it its answer itself (sendTo), the response then its own. */
  private heardDirectly = false;
  /** The listener was told: nothing more is. */
  private settled = false;

  constructor(
    private readonly pool: RequestPool,
    readonly request: EngineRequest,
    private readonly onDelta: TextDelta | undefined,
    /** Told how the request ended, once. */
    private readonly listener: EngineListener,
  ) {
    this.id = '';
    this.serviceClass = request.serviceClass ?? 'interactive';
    this.deadline = request.deadline;
    this.fairnessKey = request.fairnessKey;
    this.fairnessGroup = request.fairnessGroup;
    this.queue();
  }

  /** Waits for a slot; a caller that gives up (its signal) leaves the queue. */
  private queue(): void {
    const signal = this.request.signal;
    if (signal?.aborted) return this.fail(signal.reason);
    this.attempt += 1;
    this.id = this.pool.newId();
    // The request itself listens (handleEvent): no closure a request.
    signal?.addEventListener('abort', this, { once: true });
    this.pool.enqueue(this);
  }

  /** The caller's signal aborted while the request waited for a slot. */
  handleEvent(): void {
    if (this.pool.withdraw(this)) this.fail(this.request.signal?.reason ?? new RequestWithdrawnError('the caller went away'));
  }

  /** The scheduler gave it a slot on `replicaId` (counted in flight there already). */
  admit(replicaId: string): void {
    this.request.signal?.removeEventListener('abort', this);
    const member = this.pool.member(replicaId);
    this.member = member;
    const counts = this.pool.inFlightOn(replicaId);
    this.inFlight = counts.interactive + counts.batch + counts.background;
    this.interactive = counts.interactive;
    this.reserved = this.pool.reservedOn(member);
    this.limit = member.limit;
    this.startedAt = Date.now();
    this.engineAnswered = false;
    this.outcome = 'failed';
    this.engineLatencyMs = undefined;
    this.sent = undefined;
    this.retryAfterMs = undefined;
    const { request } = this;
    try {
      if (request.withdraw?.()) throw new RequestWithdrawnError('withdrawn before it was sent');
      // Images are fetched only once the request holds a slot, and again on each attempt:
      // requests waiting for a slot (or backing off) hold no image in memory.
      const images = this.pool.images;
      if (images?.namesIn(request)) {
        images.resolve(request.body).then(
          (withImages) => this.send(member, withImages),
          (error: unknown) => this.failed(error),
        );
      } else {
        this.send(member, undefined);
      }
    } catch (error) {
      this.failed(error);
    }
  }

  private send(member: ReplicaMember, withImages: Record<string, unknown> | undefined): void {
    try {
      const outgoing = withBody(this.request, withImages, member.replica.priorityFields(this.request, this.startedAt));
      // Held requests go out within the slots work that can wait may use.
      const gate = member.ahead > 0 ? { limit: Math.max(1, slotsForWaitingWork(this.limit, this.reserved)) } : undefined;
      // The request hears the replica itself where the replica can tell it (no promise an attempt).
      this.heardDirectly = member.replica.sendTo !== undefined;
      if (member.replica.sendTo) member.replica.sendTo(outgoing, this.onDelta, gate, this);
      else
        member.replica.send(outgoing, this.onDelta, gate).then(
          (response) => this.answered(response),
          (error: unknown) => this.failed(error),
        );
    } catch (error) {
      this.failed(error);
    }
  }

  /** The replica answered this attempt (ReplicaListener). */
  answered(response: ReplicaResponse): void {
    try {
      this.answer(response);
    } catch (error) {
      // A step of the pool's own failed (none should): the caller hears it rather than waiting forever.
      this.fail(error);
    }
  }

  /** This attempt got no answer, or could not be sent (ReplicaListener). */
  failed(error: unknown): void {
    try {
      this.noAnswer(error);
    } catch (thrown) {
      this.fail(thrown);
    }
  }

  private answer(response: ReplicaResponse): void {
    const member = this.member!;
    this.engineAnswered = true;
    this.engineLatencyMs = response.engineLatencyMs;
    this.sent = response.sent;
    // A 5xx says nothing of how fast the engine works (and answers fast): not a throughput sample.
    this.outcome = overloaded(response.statusCode) ? 'overloaded' : response.statusCode === 504 ? 'timeout' : transient(response) ? 'failed' : 'answered';
    if (!transient(response)) {
      member.health.answered();
      this.pool.attemptEnded(this, member);
      // A response told through sendTo is this request's own (Replica.sendTo): completed in place,
      // not copied (every batch line's answer passes here).
      if (this.heardDirectly) (response as { servedBy?: ServedBy }).servedBy = member.servedBy();
      else response = { ...response, servedBy: member.servedBy() };
      this.succeed(response);
      return;
    }
    member.health.failed(false, Date.now());
    this.lastResponse = response;
    this.lastError = `${member.replica.id} answered ${response.statusCode}`;
    this.retryAfterMs = response.retryAfterMs;
    this.pool.attemptEnded(this, member);
    this.again(member);
  }

  private noAnswer(error: unknown): void {
    const member = this.member!;
    this.sent = (error as { sent?: ReplicaResponse['sent'] } | undefined)?.sent;
    if (this.request.signal?.aborted || error instanceof RequestWithdrawnError || error instanceof ImageFetchError) {
      this.pool.attemptEnded(this, member);
      this.fail(error);
      return;
    }
    member.health.failed(true, Date.now());
    if (error instanceof StreamCutError) {
      this.pool.attemptEnded(this, member);
      this.fail(error);
      return;
    }
    if (error instanceof Error && error.name === 'TimeoutError') this.outcome = 'timeout';
    this.lastError = `${member.replica.id}: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
    this.pool.attemptEnded(this, member);
    this.again(member);
  }

  private succeed(response: EngineResponse): void {
    if (this.settled) return;
    this.settled = true;
    this.listener.answered(response);
  }

  private fail(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.listener.failed(error);
  }

  /** After a transient failure: another attempt after the backoff, elsewhere where there is elsewhere; or the last answer, or the error. */
  private again(member: ReplicaMember): void {
    (this.avoid ??= new Set()).add(member.replica.id);
    if (this.attempt < this.pool.maxAttempts) {
      setTimeout(() => this.queue(), this.retryAfterMs ?? backoffDelay({ firstMs: this.pool.backoffMs, maxMs: 10_000, jitter: true }, this.attempt));
      return;
    }
    if (this.lastResponse) return this.succeed(this.lastResponse);
    // The message reaches callers (batch error files are readable without a credential): it names
    // no replica, address or connection error. Those go in `detail`, for the logs.
    const model = typeof this.request.body.model === 'string' ? this.request.body.model : this.pool.model;
    this.fail(new EngineUnavailableError(`No engine answered for model ${JSON.stringify(model)} after ${this.pool.maxAttempts} attempts`, undefined, this.lastError));
  }
}
