// Estimates over a stream of timestamped observations that forget the past exponentially, with
// time constant τ: an observation τ old weighs e⁻¹ of a fresh one. O(1) memory and work per
// observation, and no clock of their own: every answer is a function of the observations and the
// time asked about, so tests drive them with plain numbers.

const decay = (elapsedMs: number, timeConstantMs: number) => Math.exp(-Math.max(0, elapsedMs) / timeConstantMs);

/**
 * Events per unit of time: each event adds 1/τ, and the sum decays with τ. Divided by the weight
 * of the time observed (1 − e^(−elapsed/τ) since the first event), so it is the arrival rate from
 * the first seconds of traffic on, not a fraction of it that takes minutes to grow. The first
 * event (and the first after a silence of 5τ, when what came before weighs under 1%) opens the
 * observation and is not counted: one event alone says nothing about a rate.
 */
export class DecayingRate {
  private perMs = 0;
  private at = Number.NEGATIVE_INFINITY;
  private since = Number.NEGATIVE_INFINITY;

  constructor(readonly timeConstantMs: number) {
    if (!(timeConstantMs > 0)) throw new Error('a time constant must be a positive number of milliseconds');
  }

  record(at: number, count = 1): void {
    if (at - this.at > 5 * this.timeConstantMs) {
      this.perMs = 0;
      this.at = at;
      this.since = at;
      return;
    }
    if (at >= this.at) {
      this.perMs = this.decayedTo(at) + count / this.timeConstantMs;
      this.at = at;
    } else {
      // Reported late: it counts as much as it would have, decayed to the latest time seen.
      this.perMs += (count / this.timeConstantMs) * decay(this.at - at, this.timeConstantMs);
      this.since = Math.min(this.since, at);
    }
  }

  perSecond(now: number): number {
    const observed = 1 - decay(Math.max(now, this.at) - this.since, this.timeConstantMs);
    return observed > 0 ? (this.decayedTo(now) / observed) * 1000 : 0;
  }

  private decayedTo(now: number): number {
    return this.at === Number.NEGATIVE_INFINITY ? 0 : this.perMs * decay(now - this.at, this.timeConstantMs);
  }
}

/**
 * A mean in which each sample weighs e^(−age/τ). Without new samples it keeps its value (both sums
 * decay alike): a latency stays known while traffic pauses; how busy things are is the rate's job.
 */
export class DecayingMean {
  private sum = 0;
  private weight = 0;
  private at = Number.NEGATIVE_INFINITY;

  constructor(readonly timeConstantMs: number) {
    if (!(timeConstantMs > 0)) throw new Error('a time constant must be a positive number of milliseconds');
  }

  record(at: number, sample: number): void {
    if (!Number.isFinite(sample)) return;
    if (at >= this.at) {
      const factor = this.at === Number.NEGATIVE_INFINITY ? 0 : decay(at - this.at, this.timeConstantMs);
      this.sum = this.sum * factor + sample;
      this.weight = this.weight * factor + 1;
      this.at = at;
    } else {
      const factor = decay(this.at - at, this.timeConstantMs);
      this.sum += sample * factor;
      this.weight += factor;
    }
  }

  /** Undefined until the first sample. */
  value(_now: number): number | undefined {
    // Both sums decay by the same factor, so the ratio does not depend on when it is asked.
    return this.weight > 0 ? this.sum / this.weight : undefined;
  }
}
