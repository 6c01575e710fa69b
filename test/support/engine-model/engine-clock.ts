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

/**
 * How late a timer may fire and the engine still start its next step where the previous one
 * ended. An engine computes on its GPU whatever the host's timers do: late timers on a busy
 * machine must not slow the model down, only bunch its answers.
 */
export const CATCH_UP_MS = 25;

/** Where a step starts: right where the previous one ended when the engine is catching up with it, else now. */
export function stepStart(now: number, lastStepEnd: number): number {
  return now - lastStepEnd <= CATCH_UP_MS ? Math.min(now, lastStepEnd) : now;
}
