import type { TextDelta } from './builtin/builtin-engine.js';
import type { EngineListener, EngineRequest, EngineResponse, InferenceEngine } from './engine.js';
import type { ImageResolver } from './images/image-resolver.js';
import { PooledRequest, type RequestPool, transient } from './pool-request.js';
import type { Replica } from './replica.js';
import { ReplicaMember } from './replica-member.js';
import type { ServiceClass } from './scheduling/urgency.js';
import type { FleetShare } from './scheduling/interactive-headroom.js';
import { slotsForWaitingWork } from './scheduling/hold-ahead.js';
import { InteractiveQueueing } from './scheduling/interactive-yield.js';
import { InteractiveObjective } from './scheduling/interactive-objective.js';
import { FleetScheduler, type ReplicaCapacity } from './scheduling/scheduler.js';

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

/** A replica holding no request has its gauges read once in this many readings: nothing of this process's depends on them then. */
const LOAD_READINGS_WHEN_IDLE = 20;

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
  private readonly scheduler = new FleetScheduler<PooledRequest>();
  private nextId = 0;
  /** What capacities() returns, one a member. */
  private readonly capacityViews: Array<{ readonly id: string; limit: number; ceiling: number; available: boolean }>;
  /** dispatch() is running (see there), and was asked again meanwhile. */
  private dispatching = false;
  private dispatchAgain = false;
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
    this.requestPool = this.poolForRequests();
    this.capacityViews = this.members.map((member) => ({ id: member.replica.id, limit: 0, ceiling: member.ceiling, available: false }));
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
    if ((request.serviceClass ?? 'interactive') !== 'interactive' || !objective) return this.promised(request, onDelta);
    const receivedAt = Date.now();
    // The objective is the caller's view: the wait for a slot, every attempt and the backoffs between.
    return this.promised(request, onDelta).then((response) => {
      if (!transient(response)) objective.answered(Date.now(), Date.now() - receivedAt);
      return response;
    });
  }

  submit(request: EngineRequest, listener: EngineListener): void {
    if ((request.serviceClass ?? 'interactive') === 'interactive' && this.objective) {
      // The objective hears interactive answers: through infer().
      this.infer(request).then(
        (response) => listener.answered(response),
        (error: unknown) => listener.failed(error),
      );
      return;
    }
    new PooledRequest(this.requestPool, request, undefined, listener);
  }

  private promised(request: EngineRequest, onDelta: TextDelta | undefined): Promise<EngineResponse> {
    return new Promise<EngineResponse>((resolve, reject) => new PooledRequest(this.requestPool, request, onDelta, { answered: resolve, failed: reject }));
  }

  /** The pool as its requests see it (pool-request.ts): one object, made once. */
  private readonly requestPool: RequestPool;

  private poolForRequests(): RequestPool {
    return {
      model: this.model,
      maxAttempts: this.settings.maxAttempts,
      backoffMs: this.settings.backoffMs,
      images: this.images,
      newId: () => String(this.nextId++),
      enqueue: (request) => {
        this.scheduler.enqueue(request);
        this.dispatch();
      },
      withdraw: (request) => this.scheduler.withdraw(request.id) !== undefined,
      member: (replicaId) => this.members.find((member) => member.replica.id === replicaId)!,
      inFlightOn: (replicaId) => this.scheduler.inFlightOn(replicaId),
      reservedOn: (member) => this.reservedOn(member),
      attemptEnded: (request, member) => this.attemptEnded(request, member),
    };
  }

  /** An attempt is over: its slot is freed, the replica's capacity and the metrics learn from it, and what may start now starts. */
  private attemptEnded(request: PooledRequest, member: ReplicaMember): void {
    this.scheduler.complete(request.id, request.engineAnswered);
    member.capacity.interactiveTraffic(this.scheduler.interactiveRecent(), Date.now());
    const elapsedMs = Date.now() - request.startedAt;
    const { sent, engineLatencyMs, outcome } = request;
    // The engine's own latency where the replica measured it: the time an answer then waits
    // for this event loop (busy with other lines' work) is not the engine crowding. A request
    // the replica held counts from when it actually went out.
    // A held request's limit is its gate's (the learned limit less the reserve): the limit was in
    // use when that much batch work ran. Judged against the whole limit instead, it grew less
    // and interactive p99 beside a batch went from 1.01× to 1.45× (bench/FINDINGS.md).
    member.capacity.record({
      startedAt: sent?.at ?? request.startedAt,
      latencyMs: engineLatencyMs ?? elapsedMs,
      outcome,
      inFlight: sent?.inFlight ?? request.inFlight,
      reserved: request.reserved,
      limit: sent?.limit ?? request.limit,
      interactive: request.interactive,
    });
    // Against the uncrowded latency, not the lowest window mean: that lies below what uncrowded
    // requests take by about 2.6 standard errors, which for requests of mixed lengths alone
    // would look like a queue.
    // Asked only for interactive answers: every batch line passes here.
    if (request.serviceClass === 'interactive' && outcome === 'answered') this.queueing.answered(engineLatencyMs ?? elapsedMs, member.capacity.uncrowdedLatencyMs);
    for (const listener of this.answeredListeners) listener(request.serviceClass, elapsedMs / 1000);
    this.dispatch();
  }

  /** Starts whatever the scheduler admits now. */
  private dispatch(): void {
    // A request admitted here may end at once (withdrawn, or refused before it went out) and ask
    // again: that is taken as one more round of this loop, not a call within it, so that a queue
    // of withdrawn lines does not become a stack as deep as itself.
    if (this.dispatching) {
      this.dispatchAgain = true;
      return;
    }
    this.dispatching = true;
    try {
      do {
        this.dispatchAgain = false;
        for (const { work, replica } of this.scheduler.admit(this.capacities(), this.batchCap(Date.now()))) work.admit(replica);
      } while (this.dispatchAgain);
    } finally {
      this.dispatching = false;
    }
  }

  /**
   * The replicas as the scheduler sees them now. The same objects each call, brought up to date
   * (it is asked two or three times for every batch line): what it returns is read at once and
   * never kept.
   */
  private capacities(): readonly ReplicaCapacity[] {
    const now = Date.now();
    let anyHealthy = false;
    for (const member of this.members) {
      if (!this.withheld.has(member.replica.id) && member.health.isUp(now)) {
        anyHealthy = true;
        break;
      }
    }
    // With every replica left out, they are all tried again rather than none; a withheld one never.
    for (let at = 0; at < this.members.length; at++) {
      const member = this.members[at]!;
      const view = this.capacityViews[at]!;
      view.limit = member.limit + member.ahead;
      view.ceiling = member.ceiling;
      view.available = !this.withheld.has(member.replica.id) && (!anyHealthy || member.health.isUp(now));
    }
    return this.capacityViews;
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
