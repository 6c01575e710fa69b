/** Readings the engine's full batch is the most running of (10 s at four readings a second, of an engine with requests waiting). */
const PEAK_READINGS = 40;

/** One reading of the engine's gauges, steadied (see EngineGaugeReadings.read). */
export interface SteadyGauges {
  /** Requests running now. */
  readonly running: number;
  /** Requests waiting at this reading and the previous one (the fewer). */
  readonly waiting: number;
  /** The engine's full batch: the most it ran lately while requests waited, or the most it ever ran. */
  readonly peak: number;
  /** Slots wanted free that the engine did not show free, at this reading and the previous one (the fewer). */
  readonly short: number;
}

/**
 * The engine's gauges as EngineCapacity judges them. Requests waiting at one reading only may be
 * answers sent again, waiting for the engine's next step, and an interactive request of another
 * process takes a reserved slot for a moment: only what two readings in a row show counts. The
 * engine's full batch is what it runs while requests wait, or the most it ran: a reading with
 * nothing waiting says only that nobody asked for more (slots held free for interactive requests
 * would otherwise, 10 s later, read as the engine's size, and the next reserve come off that).
 */
export class EngineGaugeReadings {
  private runningSeen: number[] = [];
  private lastWaiting = 0;
  private lastShort = 0;

  /** A reading of the running and waiting gauges, with the slots that should show free in the engine (`freeWanted`). */
  read(running: number, waitingNow: number, freeWanted: number): SteadyGauges {
    const waiting = Math.min(waitingNow, this.lastWaiting);
    this.lastWaiting = waitingNow;
    if (waitingNow > 0 || this.runningSeen.length === 0 || running > Math.max(...this.runningSeen)) {
      this.runningSeen.push(running);
      if (this.runningSeen.length > PEAK_READINGS) this.runningSeen.shift();
    }
    const peak = Math.max(...this.runningSeen);
    const shortNow = Math.max(0, freeWanted - Math.max(0, peak - running));
    const short = Math.min(shortNow, this.lastShort);
    this.lastShort = shortNow;
    return { running, waiting, peak, short };
  }
}
