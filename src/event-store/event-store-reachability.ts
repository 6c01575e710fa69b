import type { EventStore } from './event-store.js';

export interface ReachabilitySettings {
  /** Time between probes while the store answers. */
  readonly intervalMs: number;
  /** A probe not answered within this is a failure (a server cut off mid-connection answers nothing). */
  readonly timeoutMs: number;
}

export const DEFAULT_REACHABILITY: ReachabilitySettings = { intervalMs: 2_000, timeoutMs: 2_000 };

/**
 * Whether a networked event store answers, for /ready: its head position read now and then, the
 * cheapest query every store has. A write refused while the store is away already answers 503
 * (event_store_unavailable); this says so before anyone writes, so that a probe or an operator
 * sees it. The embedded store is a file in this process and is not probed.
 */
export class EventStoreReachability {
  private failure: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private probing: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly store: Pick<EventStore, 'headPosition' | 'kind'>,
    private readonly settings: ReachabilitySettings = DEFAULT_REACHABILITY,
  ) {}

  /** Whether the last probe was answered (true before the first, and for the embedded store). */
  get reachable(): boolean {
    return this.failure === undefined;
  }

  /** Why the last probe failed (for the logs: it may name a host). */
  get cause(): string | undefined {
    return this.failure;
  }

  start(): void {
    if (this.store.kind === 'embedded' || this.timer || this.stopped) return;
    const next = () => {
      this.timer = setTimeout(() => {
        this.probing = this.probe().finally(() => {
          this.probing = undefined;
          if (!this.stopped) next();
        });
      }, this.settings.intervalMs);
      this.timer.unref();
    };
    next();
  }

  /** One probe now: the head position read within the timeout. */
  async probe(): Promise<void> {
    let timeout: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.store.headPosition(),
        new Promise((_, reject) => {
          timeout = setTimeout(() => reject(new Error(`no answer within ${this.settings.timeoutMs} ms`)), this.settings.timeoutMs);
        }),
      ]);
      this.failure = undefined;
    } catch (error) {
      this.failure = error instanceof Error ? error.message || error.name : String(error);
    } finally {
      clearTimeout(timeout);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.probing;
  }
}
