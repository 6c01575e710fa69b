// The time an engine model runs on. The simulator runs it on the process's clock; tests and
// calibration run it on simulated time (test/support/discrete-events.ts has the same shape), so a
// minute of engine steps takes milliseconds and every run is the same.

export interface EngineClock {
  /** Milliseconds, from any origin. */
  readonly now: number;
  /** Runs `run` once `delayMs` have passed. */
  after(delayMs: number, run: () => void): void;
}

/** The process's monotonic clock and its timers. */
export const processClock: EngineClock = {
  get now() {
    return performance.now();
  },
  after(delayMs, run) {
    setTimeout(run, Math.max(0, delayMs));
  },
};
