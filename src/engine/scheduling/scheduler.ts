import { FairDeadlineQueue } from './fair-deadline-queue.js';
import { DEFAULT_HEADROOM, type FleetShare, type HeadroomSettings, InteractiveHeadroom } from './interactive-headroom.js';
import type { ServiceClass } from './urgency.js';

export type { ServiceClass } from './urgency.js';

/** One request waiting for an engine slot. */
export interface WorkItem {
  /** Unique among the work queued or in flight in one scheduler. */
  readonly id: string;
  readonly serviceClass: ServiceClass;
  /** Batch work: epoch ms it is due by (its batch's expires_at). Without one: least urgent. */
  readonly deadline?: number;
  /** Batch and background work: equally urgent keys (jobs) share capacity fairly. */
  readonly fairnessKey?: string;
  /** The group its key belongs to (an account): equally urgent groups share capacity first, then their keys. */
  readonly fairnessGroup?: string;
  /** Replicas to use only when no other has a free slot: a retry after they failed it. */
  readonly avoid?: ReadonlySet<string>;
}

/** A replica as the scheduler sees it: its learned concurrency limit and whether to use it. */
export interface ReplicaCapacity {
  readonly id: string;
  readonly limit: number;
  /**
   * The most it may ever hold (its configured concurrency; default: the limit). Interactive
   * requests may go past the learned limit up to it: the limit keeps back work that can wait,
   * and nothing Spool holds goes before an interactive request, so holding one back only adds
   * its wait.
   */
  readonly ceiling?: number;
  /** false while it is left out (failing, cooling down). Default true. */
  readonly available?: boolean;
}

export interface Admission<T> {
  readonly work: T;
  readonly replica: string;
}

export interface SchedulerSettings {
  /** The clock, in epoch ms; tests pass a simulated one. */
  readonly now?: () => number;
  readonly headroom?: HeadroomSettings;
  /** The urgency scale's first step (see urgencyLevel). */
  readonly urgencyUnitMs?: number;
}

type Counts = Record<ServiceClass, number>;
const zero = (): Counts => ({ interactive: 0, batch: 0, background: 0 });

interface Running<T> {
  readonly work: T;
  readonly replica: string;
  readonly admittedAt: number;
}

/**
 * What runs next on one model's replicas, and where. Pure: no I/O and no timers; the pool calls
 * enqueue() when work arrives, admit() whenever something may have changed (work arrived,
 * work finished, a limit or a replica's health changed) and sends what it returns, and
 * complete() when an admitted request is over.
 *
 * Rules:
 * 1. Interactive first, in arrival order: while one waits, nothing else is admitted, so it takes
 *    the very next free slot on any replica. Past every replica's learned limit it still goes,
 *    up to the replica's ceiling: only work that can wait is held back.
 * 2. Batch next: most urgent deadline first, equally urgent jobs sharing slots fairly
 *    (FairDeadlineQueue).
 * 3. Background only when no batch work waits.
 * 4. Batch and background together stay below the available replicas' total limit by a reserve
 *    that follows the interactive load (InteractiveHeadroom), so an interactive request usually
 *    finds a slot free instead of waiting for a batch line to finish; and below the cap an
 *    interactive objective sets, where the operator set one.
 * Batch and background work is held to each replica's limit; work goes to the replica with the
 * most free slots.
 */
export class FleetScheduler<T extends WorkItem = WorkItem> {
  // A Map keeps insertion order and deletes from the middle in O(1): a FIFO that can withdraw.
  private readonly interactive = new Map<string, T>();
  private readonly batch: FairDeadlineQueue<T>;
  private readonly background: FairDeadlineQueue<T>;
  private readonly queuedAs = new Map<string, ServiceClass>();
  private readonly running = new Map<string, Running<T>>();
  private readonly perReplica = new Map<string, Counts>();
  private readonly headroom: InteractiveHeadroom;
  private readonly now: () => number;

  constructor(settings: SchedulerSettings = {}) {
    this.now = settings.now ?? Date.now;
    this.headroom = new InteractiveHeadroom(settings.headroom ?? DEFAULT_HEADROOM);
    this.batch = new FairDeadlineQueue<T>(settings.urgencyUnitMs);
    this.background = new FairDeadlineQueue<T>(settings.urgencyUnitMs);
  }

  enqueue(work: T): void {
    if (this.queuedAs.has(work.id) || this.running.has(work.id)) throw new Error(`work ${work.id} is already queued or in flight`);
    this.queuedAs.set(work.id, work.serviceClass);
    if (work.serviceClass === 'interactive') {
      this.interactive.set(work.id, work);
      // A retry is the same request again, not new load.
      if (!work.avoid?.size) this.headroom.arrived(this.now());
    } else if (work.serviceClass === 'batch') this.batch.push(work.id, work, fairnessKeyOf(work), work.deadline, work.fairnessGroup);
    else this.background.push(work.id, work, fairnessKeyOf(work), undefined, work.fairnessGroup);
  }

  /** Takes back work still waiting (its caller gave up); undefined when it is not waiting. */
  withdraw(id: string): T | undefined {
    const serviceClass = this.queuedAs.get(id);
    if (!serviceClass) return undefined;
    this.queuedAs.delete(id);
    if (serviceClass === 'interactive') {
      const work = this.interactive.get(id);
      this.interactive.delete(id);
      return work;
    }
    return (serviceClass === 'batch' ? this.batch : this.background).withdraw(id);
  }

  /**
   * The work to send now, each with its replica; counted in flight until complete(). `batchCap`:
   * the most batch and background work to keep in flight across the replicas (an interactive
   * objective's; see InteractiveObjective), beside the limits and the reserve.
   */
  admit(replicas: readonly ReplicaCapacity[], batchCap = Number.POSITIVE_INFINITY): ReadonlyArray<Admission<T>> {
    const now = this.now();
    // Plain loops, and the list filtered only where a replica is left out: the pool asks twice for every batch line.
    const usable = replicas.every(isAvailable) ? replicas : replicas.filter(isAvailable);
    const capacity = slotsOf(usable);
    let others = 0;
    for (const replica of usable) {
      const counts = this.counts(replica.id);
      others += counts.batch + counts.background;
    }
    const othersCap = Math.min(batchCap, capacity - this.headroom.reserve(now, capacity));
    // Made at the first admission: the pool asks after every request that ends, mostly for one or none.
    let admitted: Array<Admission<T>> | undefined;
    for (;;) {
      if (this.interactive.size > 0) {
        const first = this.interactive.values().next().value!;
        const replica = this.place(usable, first) ?? this.place(usable, first, 'ceiling');
        // No free slot anywhere: the interactive request waits for the next one, and so does everything else.
        if (!replica) break;
        this.interactive.delete(first.id);
        (admitted ??= []).push(this.start(first, replica, now));
        continue;
      }
      if (others >= othersCap) break;
      const queue = this.batch.size > 0 ? this.batch : this.background.size > 0 ? this.background : undefined;
      const next = queue?.peek(now);
      if (!queue || !next) break;
      const replica = this.place(usable, next);
      if (!replica) break;
      queue.take(now, workId);
      (admitted ??= []).push(this.start(next, replica, now));
      others += 1;
    }
    return admitted ?? NOTHING_ADMITTED;
  }

  /**
   * Admitted work is over. `answered`: the engine answered it (its time in service then counts
   * toward the interactive latency estimate; a quick failure would understate it).
   */
  complete(id: string, answered = true): void {
    const run = this.running.get(id);
    if (!run) return;
    this.running.delete(id);
    const counts = this.counts(run.replica);
    counts[run.work.serviceClass] -= 1;
    const now = this.now();
    if (run.work.serviceClass === 'interactive') {
      if (answered) this.headroom.served(now, now - run.admittedAt);
    } else (run.work.serviceClass === 'batch' ? this.batch : this.background).finished(fairnessKeyOf(run.work));
  }

  /** Interactive load another process serves on these replicas, in requests in service, and this scheduler's share of the fleet's batch work. */
  observeRemoteInteractive(source: string, load: number, share: FleetShare = 1): void {
    this.headroom.observeRemote(source, load, this.now(), share);
  }

  /** This scheduler's own interactive traffic, for other processes to keep slots for; undefined while there is none. */
  interactiveEstimate(): { arrivalsPerSecond: number; latencyMs: number } | undefined {
    return this.headroom.estimate(this.now());
  }

  /** Interactive requests of other processes expected in service in this scheduler's part of the reserve (see InteractiveHeadroom.remoteInService). */
  remoteInteractiveInService(): number {
    return this.headroom.remoteInService(this.now());
  }

  /** Whether interactive requests have arrived lately (the reserve is kept for them). */
  interactiveRecent(): boolean {
    return this.headroom.slots(this.now()) > 0;
  }

  /** Slots batch and background work leave free on these replicas now. */
  reserve(replicas: readonly ReplicaCapacity[]): number {
    return this.headroom.reserve(this.now(), slotsOf(replicas));
  }

  queued(): Counts {
    return { interactive: this.interactive.size, batch: this.batch.size, background: this.background.size };
  }

  /** In flight on one replica, as the scheduler counts them: read at once, not kept (it changes as work starts and ends). */
  inFlightOn(replica: string): Readonly<Counts> {
    return this.counts(replica);
  }

  /** In flight on one replica, or on all. */
  inFlight(replica?: string): Counts {
    if (replica !== undefined) return { ...this.counts(replica) };
    const total = zero();
    for (const counts of this.perReplica.values()) for (const key of Object.keys(total) as ServiceClass[]) total[key] += counts[key];
    return total;
  }

  /** Its record in flight is its admission too (it has the work and the replica): one object an admission. */
  private start(work: T, replica: string, now: number): Admission<T> {
    this.queuedAs.delete(work.id);
    const running: Running<T> = { work, replica, admittedAt: now };
    this.running.set(work.id, running);
    this.counts(replica)[work.serviceClass] += 1;
    return running;
  }

  /** The replica with a free slot (below its limit, or its ceiling) and the most of them, preferring those the work does not avoid. */
  private place(replicas: readonly ReplicaCapacity[], work: T, bound: 'limit' | 'ceiling' = 'limit'): string | undefined {
    let best: string | undefined;
    let bestFree = 0;
    let bestAvoided = false;
    for (const replica of replicas) {
      const counts = this.counts(replica.id);
      const slots = bound === 'ceiling' ? Math.max(replica.limit, replica.ceiling ?? replica.limit) : replica.limit;
      const free = Math.floor(slots) - counts.interactive - counts.batch - counts.background;
      if (free <= 0) continue;
      const avoided = work.avoid?.has(replica.id) ?? false;
      if (best === undefined || (bestAvoided && !avoided) || (bestAvoided === avoided && free > bestFree)) {
        best = replica.id;
        bestFree = free;
        bestAvoided = avoided;
      }
    }
    return best;
  }

  private counts(replica: string): Counts {
    let counts = this.perReplica.get(replica);
    if (!counts) {
      counts = zero();
      this.perReplica.set(replica, counts);
    }
    return counts;
  }
}

const isAvailable = (replica: ReplicaCapacity) => replica.available !== false;
const NOTHING_ADMITTED: readonly never[] = Object.freeze([]);

/** The whole slots of the replicas that take work (a loop: asked for every batch line). */
function slotsOf(replicas: readonly ReplicaCapacity[]): number {
  let slots = 0;
  for (const replica of replicas) if (isAvailable(replica)) slots += Math.max(0, Math.floor(replica.limit));
  return slots;
}
const workId = (work: WorkItem) => work.id;

/**
 * The queue's key: the job, within its group where it has one (two accounts may name their jobs
 * alike; the key holds the group's length first, so no pair of names makes another's key).
 */
function fairnessKeyOf(work: Pick<WorkItem, 'fairnessKey' | 'fairnessGroup'>): string {
  const key = work.fairnessKey ?? '';
  return work.fairnessGroup === undefined ? key : `${work.fairnessGroup.length}:${work.fairnessGroup}/${key}`;
}
