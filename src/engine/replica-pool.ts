import type { RequestOutcome } from './scheduling/capacity-window.js';
import type { TextDelta } from './builtin/builtin-engine.js';
import { type EngineRequest, type EngineResponse, EngineUnavailableError, type InferenceEngine, RequestWithdrawnError, StreamCutError, withBody } from './engine.js';
import { ImageFetchError, type ImageResolver } from './images/image-resolver.js';
import type { Replica, ReplicaResponse } from './replica.js';
import { ReplicaMember } from './replica-member.js';
import type { ServiceClass } from './scheduling/urgency.js';
import type { FleetShare } from './scheduling/interactive-headroom.js';
import { slotsForWaitingWork } from './scheduling/hold-ahead.js';
import { InteractiveQueueing } from './scheduling/interactive-yield.js';
import { InteractiveObjective } from './scheduling/interactive-objective.js';
import { FleetScheduler, type ReplicaCapacity, type WorkItem } from './scheduling/scheduler.js';
import { backoffDelay } from '../platform/retry.js';

export interface PoolSettings {
  readonly maxAttempts: number;
  readonly backoffMs: number;
  /** How long a failed replica is left out before it is tried again. */
  readonly cooldownMs: number;
  /**
   * Learn each replica's useful concurrency from its answers, up to its configured concurrency
   * (a ceiling then). false: always the configured concurrency.
   */
  readonly learnCapacity?: boolean;
  /** The objective for this model's interactive requests: their p99 in ms, waiting included (InteractiveObjective). */
  readonly interactiveP99Ms?: number;
}

/** A request waiting in the scheduler for a slot. */
interface Waiting extends WorkItem {
  admit(replica: string): void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** A replica holding no request has its gauges read once in this many readings: nothing of this process's depends on them then. */
const LOAD_READINGS_WHEN_IDLE = 20;
const overloaded = (status: number) => status === 429 || status === 503;
const transient = (response: EngineResponse) => response.statusCode === 429 || response.statusCode >= 500;

/**
 * The replicas of one model, behind one scheduler (scheduler.ts): interactive requests before
 * batch lines, batch lines by deadline and fair between jobs, background work last, and batch
 * work kept below capacity by a headroom that follows the interactive load. Each replica's
 * capacity is learned from its answers' throughput and its load gauges (engine-capacity.ts), its
 * configured concurrency a ceiling. A replica that gives no answer, or keeps answering 5xx, is left out for a while and
 * health-checked back in (replica-health.ts); transient failures are retried on the others with
 * backoff. Another process's interactive requests queueing inside the engines are made room for
 * (interactive-yield.ts).
 */
export class ReplicaPool implements InferenceEngine {
  /** Replicas held out of the scheduling (withhold). */
  private readonly withheld = new Set<string>();
  readonly description: string;
  private readonly members: ReplicaMember[];
  private readonly scheduler = new FleetScheduler<Waiting>();
  private nextId = 0;
  private readonly answeredListeners: Array<(serviceClass: ServiceClass, seconds: number) => void> = [];
  /** How long this process's interactive requests queued inside the engines, for its load reports. */
  private readonly queueing = new InteractiveQueueing();
  /** The batch concurrency the interactive objective allows, where there is one. */
  private readonly objective: InteractiveObjective | undefined;
  /** Load readings so far: a replica holding no request is read once in LOAD_READINGS_WHEN_IDLE. */
  private readings = 0;

  constructor(
    readonly model: string,
    replicas: ReadonlyArray<{ replica: Replica; concurrency: number }>,
    private readonly settings: PoolSettings,
    private readonly images?: ImageResolver,
  ) {
    if (replicas.length === 0) throw new Error(`model ${model} has no replica`);
    this.members = replicas.map(({ replica, concurrency }) => new ReplicaMember(replica, concurrency, settings));
    this.description = `${model}: ${this.members.map((member) => member.replica.description).join(', ')}`;
    this.objective = settings.interactiveP99Ms !== undefined ? new InteractiveObjective({ p99Ms: settings.interactiveP99Ms }) : undefined;
  }

  /**
   * The interactive objective and how it stands: the objective (ms), the p99 measured over the last
   * minute (ms; undefined without answers), and the batch concurrency it allows now (Infinity:
   * every slot the replicas' limits leave). Undefined without an objective.
   */
  objectiveState(): { p99Ms: number; measuredP99Ms: number | undefined; batchCap: number } | undefined {
    if (!this.objective) return undefined;
    const now = Date.now();
    return { p99Ms: this.objective.settings.p99Ms, measuredP99Ms: this.objective.measuredP99(now), batchCap: this.batchCap(now) };
  }

  /** The batch and background work the scheduler may keep in flight now: the objective's cap. */
  private batchCap(now: number): number {
    if (!this.objective) return Number.POSITIVE_INFINITY;
    const counts = this.scheduler.inFlight();
    return this.objective.batchCap(now, counts.batch + counts.background);
  }

  /**
   * How each replica's capacity is learned now, for status reports: from its gauges or throughput
   * alone, and where its search stands; `configured` where it is not learned (its limit is its
   * configured concurrency).
   */
  capacityState(): Array<ReturnType<ReplicaMember['capacityState']>> {
    return this.members.map((member) => member.capacityState());
  }

  get replicas(): Replica[] {
    return this.members.map((member) => member.replica);
  }

  /** Replicas' load, limits and health, for status reports and tests. */
  state(): Array<{ id: string; inFlight: number; waiting: number; limit: number; healthy: boolean }> {
    const now = Date.now();
    const queued = this.scheduler.queued();
    const waiting = queued.interactive + queued.batch + queued.background;
    return this.members.map((member) => {
      // A replica withheld (a reload not yet checked, or one undone that could not be) serves nobody.
      return { id: member.replica.id, inFlight: this.requestsOn(member.replica.id), waiting, limit: member.limit, healthy: member.health.isUp(now) && !this.withheld.has(member.replica.id) };
    });
  }

  /** Requests waiting and in flight, by service class. */
  load() {
    return { queued: this.scheduler.queued(), inFlight: this.scheduler.inFlight() };
  }

  /**
   * Interactive load another process serves on these replicas, in requests in service, and this
   * process's share of the fleet's batch work. `queuedMs`: how much later than the engine's
   * uncrowded latency those requests were answered lately (the median); above the slack in
   * reports in a row from one source they wait inside the engine for a slot, and each replica
   * whose batch work here fills what it may use gives one back. `answered`: the p99 of its
   * interactive answers since its previous report, and how many, which the objective judges here
   * where this process has too few of its own.
   */
  observeRemoteInteractive(source: string, load: number, share: FleetShare = 1, queuedMs?: number, answered?: { p99Ms: number; answers: number }): void {
    this.scheduler.observeRemoteInteractive(source, load, share);
    if (answered) this.objective?.reportedBy(Date.now(), answered.p99Ms, answered.answers);
    this.yieldToInteractive(source, queuedMs);
    this.dispatch();
  }

  /**
   * The median of how much later than their replica's uncrowded latency the interactive requests
   * answered since the last call came (ms); undefined with too few of them. Each call starts anew.
   */
  interactiveQueueing(): number | undefined {
    return this.queueing.median();
  }

  /** With an objective: the p99 of the interactive answers since the last call, and how many (each call starts anew). */
  interactiveAnswered(): { p99Ms: number; answers: number } | undefined {
    return this.objective?.report();
  }

  /** A slot back from each replica whose batch work fills its share, once queueing persists (see ReplicaYield). */
  private yieldToInteractive(source: string, queuedMs: number | undefined): void {
    const now = Date.now();
    // A replica whose limit is not learned has no slot to give back: its limit is its ceiling.
    for (const member of this.members.filter((each) => each.learned)) {
      member.yielding.report(source, queuedMs, now, () => {
        const counts = this.scheduler.inFlight(member.replica.id);
        return counts.batch + counts.background >= slotsForWaitingWork(member.limit, this.reservedOn(member));
      });
    }
  }

  /** Slots batch and background work leave free for interactive requests now, across the replicas. */
  interactiveReserve(): number {
    return this.scheduler.reserve(this.capacities());
  }

  /** This pool's own interactive traffic (arrivals per second, mean ms in service); undefined while there is none. */
  interactiveEstimate(): { arrivalsPerSecond: number; latencyMs: number } | undefined {
    return this.scheduler.interactiveEstimate();
  }

  /** Called after each engine request (each attempt), with how long the replica took. */
  onRequestDone(listener: (serviceClass: ServiceClass, seconds: number) => void): void {
    this.answeredListeners.push(listener);
  }

  infer(request: EngineRequest, onDelta?: TextDelta): Promise<EngineResponse> {
    const objective = this.objective;
    // Work that can wait goes straight to its attempts (every batch line: no async frame of its own to keep while it waits).
    if ((request.serviceClass ?? 'interactive') !== 'interactive' || !objective) return this.attempts(request, onDelta);
    const receivedAt = Date.now();
    // The objective is the caller's view: the wait for a slot, every attempt and the backoffs between.
    return this.attempts(request, onDelta).then((response) => {
      if (!transient(response)) objective.answered(Date.now(), Date.now() - receivedAt);
      return response;
    });
  }

  private async attempts(request: EngineRequest, onDelta?: TextDelta): Promise<EngineResponse> {
    // Made at the first failed attempt: most requests are answered at the first.
    let avoid: Set<string> | undefined;
    let lastResponse: EngineResponse | undefined;
    let lastError = 'no attempt made';
    for (let attempt = 1; attempt <= this.settings.maxAttempts; attempt++) {
      const { id, member } = await this.slot(request, avoid);
      const counts = this.scheduler.inFlight(member.replica.id);
      const inFlight = counts.interactive + counts.batch + counts.background;
      const reserved = this.reservedOn(member);
      const limit = member.limit;
      const ahead = member.ahead;
      const startedAt = Date.now();
      let outcome: RequestOutcome = 'failed';
      let answered = false;
      let retryAfterMs: number | undefined;
      let engineLatencyMs: number | undefined;
      let sent: ReplicaResponse['sent'];
      try {
        if (request.withdraw?.()) throw new RequestWithdrawnError('withdrawn before it was sent');
        // Images are fetched only once the request holds a slot, and again on each attempt:
        // requests waiting for a slot (or backing off) hold no image in memory.
        const withImages = this.images?.namesIn(request) ? await this.images.resolve(request.body) : undefined;
        const outgoing = withBody(request, withImages, member.replica.priorityFields(request, startedAt));
        // Held requests go out within the slots work that can wait may use.
        const gate = ahead > 0 ? { limit: Math.max(1, slotsForWaitingWork(limit, reserved)) } : undefined;
        const response = await member.replica.send(outgoing, onDelta, gate);
        answered = true;
        engineLatencyMs = response.engineLatencyMs;
        sent = response.sent;
        // A 5xx says nothing of how fast the engine works (and answers fast): not a throughput sample.
        outcome = overloaded(response.statusCode) ? 'overloaded' : response.statusCode === 504 ? 'timeout' : transient(response) ? 'failed' : 'answered';
        if (!transient(response)) {
          member.health.answered();
          return { ...response, servedBy: member.servedBy() };
        }
        member.health.failed(false, Date.now());
        lastResponse = response;
        lastError = `${member.replica.id} answered ${response.statusCode}`;
        retryAfterMs = response.retryAfterMs;
      } catch (error) {
        sent = (error as { sent?: ReplicaResponse['sent'] } | undefined)?.sent;
        if (request.signal?.aborted || error instanceof RequestWithdrawnError || error instanceof ImageFetchError) throw error;
        if (error instanceof StreamCutError) {
          member.health.failed(true, Date.now());
          throw error;
        }
        if (error instanceof Error && error.name === 'TimeoutError') outcome = 'timeout';
        member.health.failed(true, Date.now());
        lastError = `${member.replica.id}: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
      } finally {
        this.scheduler.complete(id, answered);
        member.capacity.interactiveTraffic(this.scheduler.interactiveRecent(), Date.now());
        const elapsedMs = Date.now() - startedAt;
        // The engine's own latency where the replica measured it: the time an answer then waits
        // for this event loop (busy with other lines' work) is not the engine crowding. A request
        // the replica held counts from when it actually went out.
        // A held request's limit is its gate's (the learned limit less the reserve): the limit was in
        // use when that much batch work ran. Judged against the whole limit instead, it grew less
        // and interactive p99 beside a batch went from 1.01× to 1.45× (bench/FINDINGS.md).
        member.capacity.record({ startedAt: sent?.at ?? startedAt, latencyMs: engineLatencyMs ?? elapsedMs, outcome, inFlight: sent?.inFlight ?? inFlight, reserved, limit: sent?.limit ?? limit, interactive: counts.interactive });
        // Against the uncrowded latency, not the lowest window mean: that lies below what uncrowded
        // requests take by about 2.6 standard errors, which for requests of mixed lengths alone
        // would look like a queue.
        // Asked only for interactive answers: every batch line passes here.
        if ((request.serviceClass ?? 'interactive') === 'interactive' && outcome === 'answered') this.queueing.answered(engineLatencyMs ?? elapsedMs, member.capacity.uncrowdedLatencyMs);
        for (const listener of this.answeredListeners) listener(request.serviceClass ?? 'interactive', elapsedMs / 1000);
        this.dispatch();
      }
      (avoid ??= new Set()).add(member.replica.id);
      if (attempt < this.settings.maxAttempts) {
        await sleep(retryAfterMs ?? backoffDelay({ firstMs: this.settings.backoffMs, maxMs: 10_000, jitter: true }, attempt));
      }
    }
    if (lastResponse) return lastResponse;
    // The message reaches callers (batch error files are readable without a credential): it names
    // no replica, address or connection error. Those go in `detail`, for the logs.
    const model = typeof request.body.model === 'string' ? request.body.model : this.model;
    throw new EngineUnavailableError(`No engine answered for model ${JSON.stringify(model)} after ${this.settings.maxAttempts} attempts`, undefined, lastError);
  }

  /** Waits until the scheduler gives the request a slot; a caller that gives up leaves the queue. */
  private slot(request: EngineRequest, avoid: ReadonlySet<string> | undefined): Promise<{ id: string; member: ReplicaMember }> {
    const id = String(this.nextId++);
    return new Promise((resolve, reject) => {
      const signal = request.signal;
      const onAbort = () => {
        if (this.scheduler.withdraw(id)) reject(signal?.reason ?? new RequestWithdrawnError('the caller went away'));
      };
      // Absent fields stay undefined rather than spread in: every batch line is queued here.
      const waiting: Waiting = {
        id,
        serviceClass: request.serviceClass ?? 'interactive',
        deadline: request.deadline,
        fairnessKey: request.fairnessKey,
        fairnessGroup: request.fairnessGroup,
        avoid: avoid ? new Set(avoid) : undefined,
        admit: (replica) => {
          signal?.removeEventListener('abort', onAbort);
          resolve({ id, member: this.members.find((member) => member.replica.id === replica)! });
        },
      };
      if (signal?.aborted) return reject(signal.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.scheduler.enqueue(waiting);
      this.dispatch();
    });
  }

  /** Starts whatever the scheduler admits now. */
  private dispatch(): void {
    for (const { work, replica } of this.scheduler.admit(this.capacities(), this.batchCap(Date.now()))) work.admit(replica);
  }

  private capacities(): ReplicaCapacity[] {
    const now = Date.now();
    const anyHealthy = this.members.some((member) => !this.withheld.has(member.replica.id) && member.health.isUp(now));
    // With every replica left out, they are all tried again rather than none; a withheld one never.
    return this.members.map((member) => ({
      id: member.replica.id,
      limit: member.limit + member.ahead,
      ceiling: member.ceiling,
      available: !this.withheld.has(member.replica.id) && (!anyHealthy || member.health.isUp(now)),
    }));
  }

  /**
   * Takes a replica out of the scheduling (a reload, until its probe passes): no request is sent
   * to it from now on; those it runs finish. Requests for the model wait for another replica, or
   * for its release.
   */
  withhold(replicaId: string): void {
    this.withheld.add(replicaId);
  }

  /**
   * Resolves true once the replica has no request in flight (those it holds ahead included), false
   * if some are still there after `maxMs`. A withheld replica gets nothing new, so this ends.
   */
  async drained(replicaId: string, maxMs: number): Promise<boolean> {
    for (const deadline = Date.now() + maxMs; ; ) {
      if (this.requestsOn(replicaId) === 0) return true;
      if (Date.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  release(replicaId: string): void {
    if (this.withheld.delete(replicaId)) this.dispatch();
  }

  isWithheld(replicaId: string): boolean {
    return this.withheld.has(replicaId);
  }

  /** Requests of every class the replica has in flight (those it holds ahead included). */
  private requestsOn(replicaId: string): number {
    const counts = this.scheduler.inFlight(replicaId);
    return counts.interactive + counts.batch + counts.background;
  }

  /** The limits of the replicas that take work now (of `capacities`, made now where not given). */
  private totalLimit(capacities: readonly ReplicaCapacity[] = this.capacities()): number {
    let total = 0;
    for (const capacity of capacities) if (capacity.available !== false) total += capacity.limit;
    return total;
  }

  /** The member's part of the slots the scheduler keeps free for interactive requests, by its share of the limits. */
  private reservedOn(member: ReplicaMember): number {
    // Asked for every batch line: the capacities are made once, not once for the total and again for the reserve.
    const capacities = this.capacities();
    const total = this.totalLimit(capacities);
    return total > 0 ? (this.scheduler.reserve(capacities) * member.limit) / total : 0;
  }

  /** Brings back replicas that answer their health check. */
  async checkHealth(): Promise<void> {
    const now = Date.now();
    await Promise.all(
      this.members.map(async (member) => {
        if (!member.health.isUp(now) && (await member.replica.health())) member.health.recovered();
      }),
    );
    this.dispatch();
  }

  /**
   * Reads the load gauges of the replicas that publish them (see EngineCapacity.observeLoad): each
   * that holds requests at every call, one that holds none at every LOAD_READINGS_WHEN_IDLE-th.
   */
  async readLoad(): Promise<void> {
    const reading = this.readings++;
    await Promise.all(
      this.members.map(async (member) => {
        if (!member.replica.load) return;
        const inFlight = () => this.requestsOn(member.replica.id);
        if (inFlight() === 0 && reading % LOAD_READINGS_WHEN_IDLE !== 0) return;
        const load = await member.replica.load();
        if (!load) return;
        // Other processes' interactive requests in service (the API's on the Kafka shape), this replica's share of them.
        const remoteInteractive = (this.scheduler.remoteInteractiveInService() * member.limit) / Math.max(1, this.totalLimit());
        member.observeLoad(load, { inFlight: inFlight(), reserved: this.reservedOn(member), ownInteractive: this.scheduler.inFlight(member.replica.id).interactive, remoteInteractive });
      }),
    );
    this.dispatch();
  }
}
