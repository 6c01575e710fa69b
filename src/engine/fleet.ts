import type { EngineDirectory } from './engine.js';
import type { ReplicaPool } from './replica-pool.js';

/** Model serve name → its replicas. Batches and /compat/v1 share it. */
export class Fleet implements EngineDirectory {
  private timer: NodeJS.Timeout | undefined;
  private readonly loadTimers = new Map<ReplicaPool, NodeJS.Timeout>();

  constructor(
    private readonly pools: ReadonlyMap<string, ReplicaPool>,
    /** Serves any model not named in the fleet (ENGINE_BASE_URL). */
    private readonly fallback?: ReplicaPool,
    /** Lets go of what its in-process models hold. */
    private readonly release?: () => Promise<void> | undefined,
  ) {}

  /** What the operator should know of its replicas (a model that could not be had), for /ready. */
  warnings(): string[] {
    return this.allPools().flatMap(({ pool }) => pool.replicas.flatMap((replica) => replica.warning?.() ?? []));
  }

  engineFor(model: string): ReplicaPool | undefined {
    return this.pools.get(model) ?? this.fallback;
  }

  /** Every pool with the model it serves ("*" for the ENGINE_BASE_URL engine). */
  allPools(): Array<{ model: string; pool: ReplicaPool }> {
    return [...[...this.pools].map(([model, pool]) => ({ model, pool })), ...(this.fallback ? [{ model: '*', pool: this.fallback }] : [])];
  }

  models(): string[] {
    return [...this.pools.keys()];
  }

  /** Models (and the ENGINE_BASE_URL engine, as "*") whose every replica is left out after failing. */
  modelsWithoutHealthyReplica(): string[] {
    const named = [...this.pools].filter(([, pool]) => !pool.state().some((slot) => slot.healthy)).map(([model]) => model);
    return this.fallback && !this.fallback.state().some((slot) => slot.healthy) ? [...named, '*'] : named;
  }

  startHealthChecks(intervalMs: number): void {
    const tick = () => {
      void Promise.all([...this.pools.values(), ...(this.fallback ? [this.fallback] : [])].map((pool) => pool.checkHealth())).finally(() => {
        if (this.timer) this.timer = setTimeout(tick, intervalMs).unref();
      });
    };
    this.timer = setTimeout(tick, intervalMs).unref();
  }

  /**
   * Reads the replicas' load gauges every `intervalMs` (ReplicaPool.readLoad): often, because they
   * say at once when an engine's batch is full or another client's load makes requests wait, which
   * throughput only finds at its next probe.
   */
  startLoadReadings(intervalMs: number): void {
    // One loop per pool: a replica whose /metrics is slow to answer delays its own readings only.
    for (const pool of new Set([...this.pools.values(), ...(this.fallback ? [this.fallback] : [])])) {
      const tick = () => {
        void pool.readLoad().finally(() => {
          if (this.loadTimers.has(pool)) this.loadTimers.set(pool, setTimeout(tick, intervalMs).unref());
        });
      };
      this.loadTimers.set(pool, setTimeout(tick, intervalMs).unref());
    }
  }

  stop(): void {
    clearTimeout(this.timer);
    for (const timer of this.loadTimers.values()) clearTimeout(timer);
    this.loadTimers.clear();
    this.timer = undefined;
    void this.release?.();
  }
}

