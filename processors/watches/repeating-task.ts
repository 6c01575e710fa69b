import { isOutOfSpace } from '../../src/platform/storage-space.js';

/**
 * Runs `work` at start, then `intervalMs` after each run has ended: never two runs at once, and a
 * slow run delays the next rather than piling up. A failed run is reported and the next one goes
 * ahead. stop() waits for a run under way.
 */
export class RepeatingTask {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private halted = true;

  constructor(
    private readonly work: () => Promise<unknown>,
    private readonly intervalMs: number,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    if (!this.halted) return;
    this.halted = false;
    const tick = () => {
      this.running = this.work()
        // A write refused for lack of space was reported by the store that refused it, once for
        // the whole episode (src/storage-space.ts); the next run tries again.
        .catch((error: unknown) => (isOutOfSpace(error) ? undefined : this.onError(error)))
        .finally(() => {
          if (!this.halted) this.timer = setTimeout(tick, this.intervalMs).unref();
        });
    };
    // Off the caller's stack: a start never runs work synchronously inside it.
    this.timer = setTimeout(tick, 0).unref();
  }

  /** true once stop() was called (or before start()): a long run may end early. */
  get stopped(): boolean {
    return this.halted;
  }

  async stop(): Promise<void> {
    this.halted = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
