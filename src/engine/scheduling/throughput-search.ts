export interface ThroughputSearchSettings {
  /** The knob's range: integers from `least` to `most`. */
  readonly least: number;
  readonly most: number;
  /** Where it starts. */
  readonly initial: number;
  /** A value whose rate is within this fraction of the best rate seen serves as well as the best. */
  readonly flatness?: number;
  /** Doubling the knob raised the rate by less than this: the knee lies behind. */
  readonly rise?: number;
  /** The search stops once the interval left is this fraction of its upper end (or one step). */
  readonly resolution?: number;
  /** Measured windows per value (each after the one the change itself spoils); a clear rise in startup takes one. */
  readonly windowsPerValue?: number;
  /** Time between probes: [first, most], doubling while probes find the knee where it was. */
  readonly probeGapMs?: readonly [number, number];
  /** A probe moves the knob by this fraction of it (at least one step): an eighth, enough to tell from the flatness, and a probe down costs a batch little. */
  readonly probeStep?: number;
}

export type SearchPhase = 'startup' | 'search' | 'cruise' | 'probe-up' | 'probe-down';

interface Measurement {
  answers: number;
  ms: number;
  windows: number;
}

/**
 * Finds the smallest setting of a knob (requests kept in flight, or waiting inside an engine) at
 * which the completions per second are as high as any setting gives, and follows it as it moves.
 * Pure: it is told what each window of answers at the current setting measured, and says which
 * setting to use next.
 *
 * Why throughput and not latency: every real engine batches, so its latency rises with load while
 * its throughput rises faster; a rule that reads rising latency as a queue backs off exactly when
 * the engine is used well. Throughput rises with the knob until the engine is full, then stays
 * flat: past that point more in flight only queues.
 *
 * - Startup doubles the knob per measured value while the rate rises by at least `rise`.
 * - Search: the rates measured in this episode split into values at least (1 − flatness) of the
 *   best and values below it; it narrows the interval between the largest value below and the
 *   smallest value at the best (from below, by where the rate would reach the best at the slope it
 *   had, then by halves), down to `resolution`, and cruises at the smallest value at the best
 *   (erring a step low rather than high: a step high queues inside the engine for good).
 * - Cruise holds it, and after a gap probes a step up (has the engine grown?) and a step down (has
 *   it shrunk, or another client taken part of it?), alternately. A probe that finds the knee where
 *   it was doubles the gap; one that finds it moved starts a new episode from there. A step up
 *   queues requests inside a full engine for its windows, so the caller may forbid it (an
 *   interactive request arriving then would wait behind them).
 * - Overload (429, 503, timeouts) halves it at once and cruises there until the next probe.
 */
export class ThroughputSearch {
  private current: number;
  private state: SearchPhase = 'startup';
  /** This episode's measurements, by value. */
  private table = new Map<number, Measurement>();
  private cruiseValue: number | undefined;
  private cruiseRate: number | undefined;
  private gap: number;
  private knees = 0;
  /** The rate where the search last settled on a knee it found (undefined since any other change). */
  private kneeRate: number | undefined;
  private nextProbeAt = Number.POSITIVE_INFINITY;
  private nextProbe: 'up' | 'down' = 'down';
  /** The value the engine last refused work at, and until when growth stops below it. */
  private refusedAt: { value: number; until: number } | undefined;
  private readonly least: number;
  private readonly most: number;
  private readonly flatness: number;
  private readonly rise: number;
  private readonly resolution: number;
  private readonly windowsPerValue: number;
  private readonly minGap: number;
  private readonly maxGap: number;
  private readonly probeStep: number;

  constructor(settings: ThroughputSearchSettings) {
    this.least = Math.max(0, Math.floor(settings.least));
    this.most = Math.max(this.least, Math.floor(settings.most));
    this.current = this.clamp(settings.initial);
    this.flatness = settings.flatness ?? 0.03;
    this.rise = settings.rise ?? 0.1;
    this.resolution = settings.resolution ?? 1 / 32;
    this.windowsPerValue = Math.max(1, settings.windowsPerValue ?? 2);
    this.minGap = settings.probeGapMs?.[0] ?? 5_000;
    this.maxGap = settings.probeGapMs?.[1] ?? 300_000;
    this.gap = this.minGap;
    this.probeStep = settings.probeStep ?? 0.125;
  }

  /** The setting to use now. */
  get value(): number {
    return this.current;
  }

  get phase(): SearchPhase {
    return this.state;
  }

  /** Whether nothing has been measured yet: the start may still be moved (startAt). */
  get untouched(): boolean {
    return this.state === 'startup' && this.table.size === 0 && this.refusedAt === undefined;
  }

  /** Moves the start, before anything was measured; later, the search's own findings hold. */
  startAt(value: number): void {
    if (this.untouched) this.current = this.clamp(value);
  }

  /** How many times the search has settled where the rate flattened (not at a bound, nor back from a probe). */
  get kneesFound(): number {
    return this.knees;
  }

  /**
   * A window of `answers` answers to requests sent at the current value, over `ms` milliseconds,
   * ending at `at`. `mayGrow`: false while the engine says it has no room (startup then stops where
   * it is, and no probe goes up); `mayProbeUp`: false while a probe up would cost more than it may
   * find; `belowKnee`: the caller keeps the cruise below the knee the search found (slots held free
   * for other work), so a probe up must beat the knee's rate, not the cruise's, to start a new
   * episode. Returns true when the value changed.
   */
  measured(answers: number, ms: number, at: number, { mayGrow = true, mayProbeUp = true, belowKnee = false }: { mayGrow?: boolean; mayProbeUp?: boolean; belowKnee?: boolean } = {}): boolean {
    if (!(answers > 0 && ms > 0)) return false;
    const entry = this.table.get(this.current) ?? { answers: 0, ms: 0, windows: 0 };
    entry.answers += answers;
    entry.ms += ms;
    entry.windows += 1;
    this.table.set(this.current, entry);
    if (entry.windows < this.windowsPerValue && !(this.state === 'startup' && this.clearRise())) return false;
    const before = this.current;
    this.decide(at, mayGrow && mayProbeUp, mayGrow, belowKnee);
    return this.current !== before;
  }

  /**
   * The engine refused work or timed out at the current value: half of it at once, then growing
   * again (a refusal may be a burst's, or not the load's at all), back to the refused value but not
   * past it before the shortest probe gap.
   */
  overloaded(at: number): boolean {
    const before = this.current;
    // Until a probe up may go past it: the shortest gap after the next cruise begins.
    this.refusedAt = { value: before, until: Number.POSITIVE_INFINITY };
    this.table = new Map();
    this.kneeRate = undefined;
    this.state = 'startup';
    this.current = this.clamp(Math.floor(before / 2));
    return this.current !== before;
  }

  /** The most the value may grow to at `at`: a value refused lately. */
  private growthBound(at: number): number {
    return this.refusedAt && at < this.refusedAt.until ? this.refusedAt.value : this.most;
  }

  /** The largest value measured in this episode below the current one. */
  private previousValue(): number | undefined {
    let previous: number | undefined;
    for (const value of this.table.keys()) if (value < this.current && (previous === undefined || value > previous)) previous = value;
    return previous;
  }

  /**
   * Cruising, the next probe is due by `at`: a caller with outside evidence that the engine has
   * room (its gauges show nothing waiting) may bring it forward.
   */
  probeSoon(at: number): void {
    if (this.state === 'cruise') {
      this.nextProbeAt = Math.min(this.nextProbeAt, at);
      this.nextProbe = 'up';
    }
  }

  /**
   * Outside evidence (the engine's gauges) that the engine serves less than the cruising value:
   * cruise at `value` from `at`, and probe up again after the shortest gap.
   */
  cruiseAt(value: number, at: number): void {
    this.kneeRate = undefined;
    this.cruise(this.clamp(value), undefined, at, this.minGap);
    this.nextProbe = 'up';
  }

  /**
   * In startup, whether the current value's rate already rose clearly above the previous one's
   * (by twice `rise`): far below the engine's capacity a doubling doubles the rate, and one window
   * says so; near it the rise is small, and the second window confirms it.
   */
  private clearRise(): boolean {
    const previous = this.previousValue();
    if (previous === undefined) return true;
    return this.rateOf(this.current)! >= this.rateOf(previous)! * (1 + 2 * this.rise);
  }

  private rateOf(value: number): number | undefined {
    const entry = this.table.get(value);
    return entry && entry.ms > 0 ? (entry.answers * 1000) / entry.ms : undefined;
  }

  private decide(at: number, mayProbeUp: boolean, mayGrow: boolean, belowKnee: boolean): void {
    const rate = this.rateOf(this.current)!;
    switch (this.state) {
      case 'startup': {
        const previous = this.previousValue();
        const previousRate = previous === undefined ? undefined : this.rateOf(previous)!;
        if (previousRate === undefined || rate >= previousRate * (1 + this.rise)) {
          const bound = this.growthBound(at);
          if (this.current >= bound || !mayGrow) return this.cruise(this.current, rate, at, this.minGap);
          return this.set(Math.min(bound, this.clamp(Math.max(this.current + 1, this.current * 2))));
        }
        this.state = 'search';
        return this.bisect(at);
      }
      case 'search':
        return this.bisect(at);
      case 'cruise': {
        this.cruiseRate = rate;
        // The cruising value keeps only its latest windows: what it serves now, not on average.
        this.table.set(this.current, { answers: 0, ms: 0, windows: 0 });
        if (at < this.nextProbeAt) return;
        if (this.refusedAt) this.refusedAt.until = Math.min(this.refusedAt.until, at);
        const up = this.nextProbe === 'up' && mayProbeUp && this.current < this.growthBound(at);
        const down = !up && this.current > this.least;
        this.nextProbe = this.nextProbe === 'up' ? 'down' : 'up';
        if (!up && !down) {
          this.nextProbeAt = at + this.gap;
          return;
        }
        this.state = up ? 'probe-up' : 'probe-down';
        const step = Math.max(1, Math.round(this.current * this.probeStep));
        this.table.delete(up ? this.current + step : this.current - step);
        return this.set(this.clamp(up ? this.current + step : this.current - step));
      }
      case 'probe-up': {
        const base = Math.max(this.cruiseRate ?? 0, belowKnee ? (this.kneeRate ?? 0) : 0);
        if (rate > base * (1 + Math.max(this.flatness, this.rise / 2))) {
          // The engine serves more than it did: a new episode, growing from here.
          this.table = new Map([[this.current, this.table.get(this.current)!]]);
          this.kneeRate = undefined;
          this.gap = this.minGap;
          this.state = 'startup';
          return this.set(this.clamp(Math.max(this.current + 1, this.current * 2)));
        }
        return this.cruise(this.cruiseValue!, this.cruiseRate, at, Math.min(this.maxGap, this.gap * 2));
      }
      case 'probe-down': {
        const base = this.cruiseRate ?? Number.POSITIVE_INFINITY;
        if (rate >= base * (1 - this.flatness)) {
          // As much for less: the knee moved down. A new episode from here, a step further down
          // first (the knee is likely near: one probe's worth of noise within the flatness, or a
          // client that took part of the engine), then narrowed as usual.
          const cruised = this.cruiseValue!;
          this.table = new Map([
            [this.current, this.table.get(this.current)!],
            [cruised, { answers: base, ms: 1000, windows: this.windowsPerValue }],
          ]);
          this.kneeRate = undefined;
          this.gap = this.minGap;
          this.state = 'search';
          const step = Math.max(1, Math.round(this.current * this.probeStep));
          return this.set(this.clamp(this.current - step));
        }
        return this.cruise(this.cruiseValue!, this.cruiseRate, at, Math.min(this.maxGap, this.gap * 2));
      }
    }
  }

  /** One step of the bisection, or cruise once the interval is narrow enough. */
  private bisect(at: number): void {
    let best = 0;
    for (const value of this.table.keys()) best = Math.max(best, this.rateOf(value) ?? 0);
    const threshold = (1 - this.flatness) * best;
    const values = [...this.table.keys()].sort((a, b) => a - b);
    const upper = values.find((value) => (this.rateOf(value) ?? 0) >= threshold)!;
    const lower = values.filter((value) => value < upper && (this.rateOf(value) ?? 0) < threshold).pop() ?? this.least - 1;
    if (upper - lower <= Math.max(1, Math.floor(upper * this.resolution))) {
      this.knees += 1;
      const rate = this.rateOf(upper);
      this.cruise(upper, rate, at, this.gap);
      this.kneeRate = rate;
      return;
    }
    const middle = Math.floor((lower + upper) / 2) === lower ? lower + 1 : Math.floor((lower + upper) / 2);
    // Where the rate would reach the best if it kept rising as it did up to `lower` (a secant from
    // nothing): the knee itself for an engine of fixed service time, a little below it for one that
    // batches (its rate rises more slowly near its full batch). Tried from below, values at nearly
    // the best rate cost the batch little while the knee is found; the middle of a wide interval
    // may sit far below it. Near the end, the middle.
    // A secant at or next to `upper` is one the measurements already contradict (a lower value was
    // read low, as one measured while the engine filled): clamped below `upper`, it walked down a
    // step at a time (40, 39, 38… from above a 32-slot engine, three seconds); the middle instead.
    const rate = this.rateOf(lower);
    const secant = rate && rate > 0 && upper - lower > 4 ? Math.ceil((lower * best) / rate) : middle;
    this.set(secant < upper - 1 ? Math.max(lower + 1, secant) : middle);
  }

  private cruise(value: number, rate: number | undefined, at: number, gap: number): void {
    // Back from a probe, the knee is where it was; any other cruise is not at a knee found.
    if (value !== this.cruiseValue) this.kneeRate = undefined;
    this.state = 'cruise';
    this.cruiseValue = value;
    this.cruiseRate = rate;
    this.gap = gap;
    this.nextProbeAt = at + gap;
    this.table = new Map();
    this.current = value;
  }

  private set(value: number): void {
    this.current = value;
  }

  private clamp(value: number): number {
    return Math.max(this.least, Math.min(this.most, Math.floor(value)));
  }
}
