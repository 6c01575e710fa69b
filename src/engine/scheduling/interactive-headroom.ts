import { DecayingMean, DecayingRate } from './decaying-estimators.js';

export interface HeadroomSettings {
  /** How fast the estimates forget: arrivals and latencies older than this weigh e⁻¹. */
  readonly timeConstantMs: number;
  /** Safety margin in standard deviations of the number of interactive requests in service. */
  readonly spread: number;
  /** No interactive arrival for this long: no slot is kept free at all. */
  readonly idleAfterMs: number;
  /** Of the capacity interactive traffic leaves idle (capacity − λW), others keep at least this share. */
  readonly leftoverShare: number;
  /** Interactive load reported by other processes counts for this long after it was measured. */
  readonly remoteFreshMs?: number;
}

/**
 * This process's part of the fleet's batch work: the partitions of the inference topic it holds
 * (indexes) of all of them. A bare number is a fraction, for a share not made of partitions.
 */
export type FleetShare = number | { readonly held: readonly number[]; readonly of: number };

/** The fraction of the fleet's work a share stands for. */
export function shareFraction(share: FleetShare): number {
  return typeof share === 'number' ? share : share.of > 0 ? share.held.length / share.of : 0;
}

/**
 * A share's part of an integer reserve R. For partitions, each partition j of P takes
 * ⌊(j+1)·R/P⌋ − ⌊j·R/P⌋, so the parts of the processors, whoever holds which partitions, add up to
 * R exactly: rounding each processor's R·share instead kept 2 + 2 of a reserve of 3 on two
 * processors, a slot of the batches' 29 (bench/FINDINGS.md).
 */
export function partOfReserve(reserve: number, share: FleetShare): number {
  if (typeof share === 'number') return Math.round(reserve * share);
  let part = 0;
  for (const index of share.held) part += Math.floor(((index + 1) * reserve) / share.of) - Math.floor((index * reserve) / share.of);
  return part;
}

export const DEFAULT_HEADROOM: HeadroomSettings = { timeConstantMs: 30_000, spread: 2, idleAfterMs: 120_000, leftoverShare: 0.95 };

/**
 * How many engine slots to keep free for interactive requests, from the interactive load seen.
 *
 * Little's law: the mean number of interactive requests in service is L = λ·W (arrival rate ×
 * time in service). Arrivals from many independent clients are close to Poisson, so the number
 * in service at any moment is roughly Poisson(L), whose spread is √L. Keeping L + z·√L slots
 * (square-root staffing) means an arriving request finds one free with probability about
 * Φ(z) (z = 2: ~97%) at any load. A fixed multiple of L instead keeps too few slots when L is
 * small (1.5 × 1 leaves 2, while P(N ≥ 2) is 26%) and wastes many when L is large, taking from
 * the capacity batches are promised (at least 90% of what interactive traffic leaves idle; the
 * default keeps 95%, since batch lines also lose a little to the gaps between one and the next).
 */
export class InteractiveHeadroom {
  private readonly rate: DecayingRate;
  private readonly latency: DecayingMean;
  private lastArrival = Number.NEGATIVE_INFINITY;
  /** Interactive load other processes serve on the same engines, per source. */
  private readonly remote = new Map<string, { load: number; at: number }>();
  /** This process's part of the fleet's batch work, as the last report came with it. */
  private fleetShare: FleetShare = 1;

  constructor(readonly settings: HeadroomSettings = DEFAULT_HEADROOM) {
    this.rate = new DecayingRate(settings.timeConstantMs);
    this.latency = new DecayingMean(settings.timeConstantMs);
  }

  arrived(at: number): void {
    this.rate.record(at);
    this.lastArrival = Math.max(this.lastArrival, at);
  }

  /** An interactive request answered after `latencyMs` in service (queueing excluded). */
  served(at: number, latencyMs: number): void {
    if (latencyMs >= 0) this.latency.record(at, latencyMs);
  }

  /**
   * Interactive load another process serves on these engines, in requests in service (λ·W): on
   * the Kafka shape the API serves /compat/v1, and the inference processors, which never see
   * those requests, each keep `share` of the reserve the whole fleet needs for them (share: the
   * part of the batch work this process runs). Each source's latest report replaces its previous one.
   */
  observeRemote(source: string, load: number, at: number, share: FleetShare = 1): void {
    if (!(load >= 0 && Number.isFinite(load))) return;
    this.remote.set(source, { load, at });
    const fraction = shareFraction(share);
    if (fraction > 0 && fraction <= 1) this.fleetShare = share;
  }

  /** This process's own interactive traffic: arrivals per second and mean time in service; undefined while it has none. */
  estimate(now: number): { arrivalsPerSecond: number; latencyMs: number } | undefined {
    const latencyMs = this.latency.value(now);
    if (now - this.lastArrival > this.settings.idleAfterMs || latencyMs === undefined) return undefined;
    return { arrivalsPerSecond: this.rate.perSecond(now), latencyMs };
  }

  private remoteLoad(now: number): number {
    let total = 0;
    for (const [source, report] of this.remote) {
      if (now - report.at > (this.settings.remoteFreshMs ?? 5_000)) this.remote.delete(source);
      else total += report.load;
    }
    return total;
  }

  /**
   * Of the interactive requests other processes report in service (λ·W), those this process's
   * share of the fleet stands for: they use slots of its part of the reserve without its knowing.
   */
  remoteInService(now: number): number {
    const load = this.remoteLoad(now);
    return load > 0 ? load * shareFraction(this.fleetShare) : 0;
  }

  /** The mean number of interactive requests in service, λ·W: this process's and what others report. */
  load(now: number): number {
    return (this.rate.perSecond(now) / 1000) * (this.latency.value(now) ?? 0) + this.remoteLoad(now);
  }

  slots(now: number): number {
    if (now - this.lastArrival > this.settings.idleAfterMs && this.remoteLoad(now) === 0) return 0;
    const load = this.load(now);
    return Math.max(1, Math.ceil(load + this.settings.spread * Math.sqrt(load) - 1e-9));
  }

  /**
   * The slots to keep free out of `capacity`: what slots() asks, but never so many that other work
   * gets less than leftoverShare of capacity − λW. On a small engine the margin gives way (8 slots,
   * load 2: 2 kept free, not 5), and a one-slot engine keeps none: batches would otherwise stop
   * whenever anyone used /compat/v1.
   */
  reserve(now: number, capacity: number): number {
    if (capacity <= 0) return 0;
    // With reports from other processes, the margin is the fleet's, of which this process keeps
    // its share: per process it would round to almost nothing (two processors of 20 slots each
    // keep 1 for a load of 2 between them, the fleet 3 of its 40).
    const share = this.remoteLoad(now) > 0 ? this.fleetShare : 1;
    const fraction = shareFraction(share);
    const fleetCapacity = capacity / fraction;
    const kept = Math.ceil(this.settings.leftoverShare * Math.max(0, fleetCapacity - this.load(now)) - 1e-9);
    const fleetReserve = Math.max(0, Math.min(this.slots(now), fleetCapacity - kept));
    return fraction === 1 ? fleetReserve : Math.min(capacity, partOfReserve(fleetReserve, share));
  }
}
