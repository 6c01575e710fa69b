import type { EngineLoad } from './engine-load-metrics.js';
import type { ServedBy } from '../domain/line-outcome.js';
import type { Replica } from './replica.js';
import { EngineCapacity } from './scheduling/engine-capacity.js';
import { requestsHeldAhead } from './scheduling/hold-ahead.js';
import { ReplicaYield } from './scheduling/interactive-yield.js';
import { ReplicaHealth } from './scheduling/replica-health.js';

/** Where a replica's limit comes from, for status reports: its engine's gauges, throughput alone, or its configuration. */
export type CapacitySource = 'gauges' | 'throughput' | 'configured';

/**
 * One replica of a pool with what the pool knows of it: its capacity (learned, or its configured
 * concurrency), its health, and the slots it gives back to other processes' interactive requests.
 */
export class ReplicaMember {
  readonly capacity: EngineCapacity;
  readonly health: ReplicaHealth;
  /** Its slots given back to other processes' interactive requests. */
  readonly yielding: ReplicaYield;
  /** Its limit is learned (EngineCapacity); false: the ceiling, always (see Replica.capacityKnown). */
  readonly learned: boolean;

  constructor(
    readonly replica: Replica,
    /** The configured concurrency: the limit where it is not learned, the most it may learn where it is. */
    readonly ceiling: number,
    settings: { readonly cooldownMs: number; readonly learnCapacity?: boolean | undefined },
  ) {
    this.learned = settings.learnCapacity !== false && !replica.capacityKnown;
    // A model in this process (the built-in ones) starts at its concurrency: it is what it is told.
    this.capacity = new EngineCapacity({ ceiling, ...(!this.learned || replica.weightsInProcess ? { initial: ceiling } : {}) });
    this.health = new ReplicaHealth(settings.cooldownMs);
    this.yielding = new ReplicaYield(this.capacity);
  }

  private lastServedBy: ServedBy | undefined;

  /**
   * What it serves now, for the answers it gives: one object while its weights stay (every batch
   * line's outcome holds it), a new one after a reload.
   */
  servedBy(): ServedBy {
    const { replica } = this;
    const checkpoint = replica.servedCheckpoint;
    const syncId = replica.servedSyncId;
    const last = this.lastServedBy;
    if (last && last.checkpoint === checkpoint && last.sync_id === syncId) return last;
    return (this.lastServedBy = { replica: replica.id, checkpoint, ...(syncId ? { sync_id: syncId } : {}) });
  }

  /** Requests it may have in flight now. */
  get limit(): number {
    return this.learned ? this.capacity.limit : this.ceiling;
  }

  /** Requests it may hold beyond its limit, when it can hold them (see requestsHeldAhead). */
  get ahead(): number {
    return this.replica.holdsRequests ? requestsHeldAhead(this.limit, this.capacity.latencyFloorMs) : 0;
  }

  /**
   * Its engine's load gauges, read now (see EngineCapacity.observeLoad). `inFlight`: this process's
   * requests on it; `reserved`: its part of the slots kept free for interactive requests;
   * `ownInteractive` and `remoteInteractive`: this process's interactive requests on it, and its
   * share of other processes' in service.
   */
  observeLoad(load: EngineLoad, use: { inFlight: number; reserved: number; ownInteractive: number; remoteInteractive: number }): void {
    // In use as the engine answered: what this process has in it, and the slots it keeps free
    // for interactive requests; of those, the whole slots that neither its own interactive
    // requests use nor, on average, those of other processes (the API's on the Kafka shape).
    // Against the reserve itself, sized for the tail of the interactive load, every burst would
    // read as the batch taking it, and the batch would shed, reading after reading, and never
    // grow back while interactive requests are served.
    const freeWanted = Math.max(0, Math.ceil(use.reserved - 1e-9) - use.ownInteractive - use.remoteInteractive);
    this.capacity.observeLoad(load, Date.now(), use.inFlight + use.reserved, freeWanted);
  }

  /** How its capacity is known now: from its gauges or throughput alone (and where its search stands), or its configuration. */
  capacityState(): { id: string; source: CapacitySource; phase: string; lookahead: number | undefined } {
    return { id: this.replica.id, source: this.learned ? this.capacity.source : 'configured', phase: this.capacity.phase, lookahead: this.capacity.lookaheadRequests };
  }
}
