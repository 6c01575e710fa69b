import type { EngineLoad } from '../engine-load-metrics.js';
import { type AdaptiveConcurrencySettings, type LimitRules, limitRules } from './adaptive-concurrency-settings.js';
import { LatencyWindow, type WindowSummary } from './latency-window.js';

/** How a request ended: answered (any answer but 429/503), overloaded (429/503), timeout, failed (other). */
export type RequestOutcome = 'answered' | 'overloaded' | 'timeout' | 'failed';

export interface RequestResult {
  /** When it was sent, epoch ms. */
  readonly startedAt: number;
  /** How long the engine took; the limit's only view of the engine's latency. */
  readonly latencyMs: number;
  readonly outcome: RequestOutcome;
  /** Requests in flight on the replica when it was sent, itself included. */
  readonly inFlight: number;
  /** Slots of the replica kept free for interactive requests when it was sent: in use as much as filled ones. */
  readonly reserved?: number;
  /** The limit when it was sent (the limit now when absent): in slow start it has grown by the time the answer comes. */
  readonly limit?: number;
}

/**
 * A replica's useful concurrency, learned from how it answers (in the spirit of TCP Vegas and
 * Netflix's Vegas/Gradient limits). Pure: every input carries its own time; latency arrives
 * measured (record()), so how it is measured can change without touching the rule below.
 *
 * - Answers are taken a window at a time: at least a limit's worth (a round trip), and enough
 *   that the noise of the window's mean stays within the tolerance (long and short requests
 *   mixed need many answers to say anything; an engine of even latencies needs few), up to ten
 *   round trips.
 * - The floor is the lowest window mean of the last `floorWindows` uncrowded windows: the
 *   engine's time for a request when it is not crowded. Recent windows only, since the lowest of
 *   ever more noisy means drifts below any true floor; and the lowest of K means lies about
 *   √(2 ln K) standard errors below their common mean, which is added back.
 * - Crowded: a window's mean above that × tolerance (and by at least `queueSlackMs`, below which
 *   a queue delays nothing measurably) by more than `confidence` standard errors
 *   (of an uncrowded window: the floor window's spread; requests that queued spread the crowded
 *   one's, which must not hide the rise). It does not grow while a window is crowded so far.
 * - Probing, sent with more in flight than the engine was last measured to serve (see relieve),
 *   a crowded window is the queue the probe made inside the engine, where Spool cannot reorder
 *   it: the limit goes at once to what the engine served, by Little's law in flight × floor /
 *   latency (the rest waited), never below half at once. An engine of fixed service time with C
 *   slots and N > C requests sent answers in N/C × the floor, so this is C in one step from any
 *   overshoot. At or below that level, crowding is another client of the engine or a stall of
 *   either host: after `persistence` windows in a row, down to the most any of them saw the
 *   engine serve (a stall inflates some windows, another client all).
 * - The first window at the level a probe's cut left may trim it once more: there the engine's
 *   queue is steady, so a rise beyond noise (even below the tolerance) is requests waiting
 *   inside it, and the limit goes to what the engine served (settle()).
 * - After a probe it holds before the next: a probe queues requests inside the engine for a few
 *   round trips, and in an engine serving in arrival order an interactive request arriving then
 *   waits behind them. The hold doubles while probes end where the last one did, and is the
 *   longest at once while interactive requests are being served (interactiveTraffic()); then,
 *   too, growth past where the last probe ended waits `interactiveProbeGapMs` after it (a probe
 *   costs the interactive requests of about a second their latency; the engine's capacity is
 *   found again within minutes, and at once after slow start).
 *   Regrowth to the level last measured is not a probe and does not wait.
 * - Otherwise, when the limit was in use (≥ 90% of it in flight or kept free for interactive
 *   requests), grow: +1 per answer until the first cut (doubling per round trip, like slow
 *   start; not while interactive requests are being served, whose latency its overshoot would
 *   cost), then +1 per round trip.
 * - 429/503/timeouts: halve. At most one cut per window of requests sent after the previous cut:
 *   answers to requests sent before it describe the old limit, and are not evidence.
 * - Engine gauges, when scraped: requests waiting inside the engine cut it; a nearly full KV
 *   cache stops growth; and with fresh gauges saying nothing waits, a latency rise is the
 *   engine's batch growing (a batching engine's answers slow as it takes more), not a queue.
 * - A rise that cutting to 1 did not cure is not crowding but longer requests: the floor is
 *   taken again from there, and it grows anew.
 */
export class AdaptiveConcurrency {
  private estimate: number;
  private window = new LatencyWindow();
  private recent: WindowSummary[] = [];
  private lastCutAt = Number.NEGATIVE_INFINITY;
  /** Crowded windows in a row so far, and the most the engine served (Little's law) in any of them. */
  private crowdedWindows = 0;
  private servedWhileCrowded = 0;
  /** Windows it holds still after a cut before probing again, and how many are left. */
  private holdWindows: number;
  private holdLeft = 0;
  /** The limit the cut that ended the previous probe left. */
  private lastCutTo: number | undefined;
  private interactiveRecent = false;
  /** Where the last probe's cut left the limit, and when (yieldSlot() lowers it). */
  private probeLevel: number | undefined;
  /** What the last probe (or slow start) found the engine to serve. */
  private probeFound: number | undefined;
  private probeEndedAt = Number.NEGATIVE_INFINITY;
  /** A probe's cut was made: the first window at the new level may still trim it (settle()). */
  private settling = false;
  private slowStart = true;
  private load: { value: EngineLoad; at: number } | undefined;
  private readonly rules: LimitRules;
  /** Answers in the first window: those to the requests sent at the starting limit (a round trip). */
  private readonly firstWindowLength: number;
  readonly ceiling: number;

  constructor(settings: AdaptiveConcurrencySettings) {
    if (!(Number.isFinite(settings.ceiling) && settings.ceiling >= 1)) throw new Error(`a concurrency ceiling must be at least 1, not ${settings.ceiling}`);
    this.ceiling = Math.floor(settings.ceiling);
    this.estimate = Math.min(this.ceiling, Math.max(1, settings.initial ?? 4));
    this.rules = limitRules(settings);
    this.firstWindowLength = Math.max(this.limit, settings.firstWindowAnswers ?? 4);
    this.holdWindows = this.rules.minHoldWindows;
  }

  /** Requests to allow in flight now: an integer from 1 to the ceiling. */
  get limit(): number {
    return Math.max(1, Math.min(this.ceiling, Math.floor(this.estimate)));
  }

  /** The latency floor learned so far, in ms (Infinity before the first window). */
  get latencyFloorMs(): number {
    return this.floor()?.mean ?? Number.POSITIVE_INFINITY;
  }

  /**
   * The mean latency of an uncrowded window, in ms: the floor less the bias of being the lowest of
   * the recent window means (Infinity before the first window). What a request's latency is
   * compared with to tell how long it waited inside the engine.
   */
  get uncrowdedLatencyMs(): number {
    const floor = this.floor();
    return floor ? this.uncrowded(floor) : Number.POSITIVE_INFINITY;
  }

  record(result: RequestResult): void {
    const completedAt = result.startedAt + result.latencyMs;
    if (result.outcome === 'failed') return;
    if (result.outcome === 'overloaded' || result.outcome === 'timeout') {
      this.cut(this.estimate * this.rules.overloadBackoff, result.startedAt, completedAt);
      return;
    }
    if (!(result.latencyMs >= 0)) return;
    // Sent before the last cut: it waited behind the excess that cut removed.
    if (result.startedAt < this.lastCutAt) return;

    const load = this.load && completedAt - this.load.at <= this.rules.loadStaleMs ? this.load.value : undefined;
    if ((load?.waiting ?? 0) > 0) {
      this.cut(this.estimate * this.rules.latencyBackoff, result.startedAt, completedAt);
      return;
    }
    this.window.add(result.latencyMs, result.inFlight);
    const floor = this.floor();
    // With fresh gauges the engine says itself whether anything waits; latency is not asked.
    const crowded = load === undefined && floor !== undefined && this.crowded(this.window.summary(), floor);
    if (this.window.count >= this.windowLength(floor)) {
      const window = this.window.summary();
      this.window = new LatencyWindow();
      if (this.holdLeft > 0) this.holdLeft -= 1;
      if (crowded) {
        this.crowdedWindows += 1;
        this.relieve(window, floor!, result.startedAt, completedAt);
        return;
      }
      this.crowdedWindows = 0;
      this.servedWhileCrowded = 0;
      if (this.settling && floor && load === undefined && window.inFlight >= 0.9 * this.limit) {
        this.settling = false;
        if (this.settle(window, floor, completedAt)) return;
      }
      this.remember(window);
    }
    // No growth while the window so far is crowded: its end decides the cut. Before the floor is
    // known it grows from the first answer: the first window holds the answers to the requests
    // sent at the starting limit (see firstWindowLength), so what is sent beyond it does not
    // touch the floor, and waiting for the floor cost a round trip near the starting limit.
    if (crowded) return;
    // Regrowth to what the engine was last measured to serve is safe; beyond it is a probe.
    if (this.holdLeft > 0 && this.limit + 1 > this.measured()) return;
    if (this.interactiveRecent && this.probeLevel !== undefined && this.limit + 1 > this.probeLevel && completedAt - this.probeEndedAt < this.rules.interactiveProbeGapMs) return;
    if ((load?.kvUsage ?? 0) >= this.rules.kvUsageHigh) return;
    if (result.inFlight + (result.reserved ?? 0) < Math.ceil(0.9 * (result.limit ?? this.limit))) return;
    // Slow start doubles per round trip, and overshoots the engine's slots by up to half before a
    // window shows it: the queue that makes inside the engine is paid for by interactive requests
    // arriving meanwhile, so while there are any it grows by one per round trip from the start.
    this.estimate = Math.min(this.ceiling, this.estimate + (this.slowStart && !this.interactiveRecent ? 1 : 1 / this.estimate));
  }

  /**
   * Whether interactive requests are being served beside the work this limit holds back: a probe
   * beyond the engine's capacity then delays them, so probes wait the longest hold.
   */
  interactiveTraffic(recent: boolean): void {
    this.interactiveRecent = recent;
  }

  /**
   * Another process's interactive requests wait inside the engine for a slot (on the Kafka shape
   * the API says so; see ReplicaPool.observeRemoteInteractive): one request fewer from `at` on,
   * and no regrowth past that level while interactive requests are served until the next probe
   * may start. Needed where several processes each learn a limit on one engine: each sees the
   * latency of its own requests only, and their limits can together hold every slot of the
   * engine without any batch request queueing (processors that cut one after the other each read
   * Little's law off a window the other had crowded, and kept 17 + 17 of 32 slots). Not below half
   * what the last probe found: a batching engine's latency also rises with load, and a batch is
   * promised most of the capacity interactive traffic leaves idle. True when the limit went down.
   */
  yieldSlot(at: number): boolean {
    // Without a probe yet (a limit at its ceiling, or one learned from the engine's gauges), the
    // level of the first yield is what it holds half of.
    this.probeFound ??= this.limit;
    const to = this.limit - 1;
    if (to < Math.max(1, Math.ceil(this.probeFound / 2))) return false;
    this.estimate = to;
    this.lastCutTo = Math.min(this.lastCutTo ?? to, to);
    this.probeLevel = Math.min(this.probeLevel ?? to, to);
    this.probeEndedAt = at;
    this.holdLeft = Math.max(this.holdLeft, this.rules.minHoldWindows);
    this.settling = false;
    this.startOver(at);
    return true;
  }

  /** Load gauges scraped from the engine at `at` (see engineLoadFrom). */
  observeLoad(load: EngineLoad, at: number): void {
    this.load = { value: load, at };
  }

  private floor(): WindowSummary | undefined {
    let lowest: WindowSummary | undefined;
    for (const window of this.recent) if (!lowest || window.mean < lowest.mean) lowest = window;
    return lowest;
  }

  /**
   * Answers a window needs: a round trip's worth, and enough that `confidence` standard errors of
   * an uncrowded window's mean are within the tolerance, but no more than ten round trips (very
   * uneven requests then make it less sensitive, not slower to act).
   */
  private windowLength(floor: WindowSummary | undefined): number {
    // The first window only finds a first floor (any lower window later replaces it), at the
    // small starting limit: one round trip. Waiting for `windowAnswers` there held a batch to a
    // few requests in flight for several round trips, a few percent of a short batch's time.
    if (!floor) return this.firstWindowLength;
    const variation = floor.mean > 0 ? floor.deviation / floor.mean : 0;
    const forNoise = Math.ceil(((this.rules.confidence * variation) / (this.rules.tolerance - 1)) ** 2);
    return Math.max(this.rules.windowAnswers, this.limit, Math.min(forNoise, 10 * this.limit));
  }

  /** The mean latency of an uncrowded window: the floor, less the bias of being the lowest of K means. */
  private uncrowded(floor: WindowSummary): number {
    // The lowest of K window means sits about √(2 ln K) standard errors below what they measure.
    const lowestBias = Math.sqrt(2 * Math.log(Math.max(2, this.recent.length)));
    return floor.mean + (lowestBias * floor.deviation) / Math.sqrt(floor.count);
  }

  private crowded(window: WindowSummary, floor: WindowSummary): boolean {
    const uncrowded = this.uncrowded(floor);
    // A first floor from a round trip's few answers may have missed the engine's spread (four
    // short answers of a mix of short and long ones): while it is the floor (until a lower full
    // window replaces it, or it is `floorWindows` old), the window's own spread counts as well.
    const deviation = this.provisional(floor) ? Math.max(floor.deviation, window.deviation) : floor.deviation;
    return window.mean > Math.max(uncrowded * this.rules.tolerance, uncrowded + this.rules.queueSlackMs) + (this.rules.confidence * deviation) / Math.sqrt(window.count);
  }

  /** A window shorter than `windowAnswers`: the first, which only found a first floor. */
  private provisional(window: WindowSummary): boolean {
    return window.count < this.rules.windowAnswers;
  }

  /**
   * A crowded window; what the engine served in it, by Little's law, is in flight × floor /
   * latency (the rest waited). Probing (sent with more in flight than the engine was last
   * measured to serve), the rise is the queue the probe made: down to that, at once. Otherwise
   * only `persistence` crowded windows in a row count: in slow start, so that it ends on a steady
   * window (it does not grow meanwhile) and not on a stall; at or below the measured level, where
   * what crowds the engine is another client of it or a stall of either host, which passes. Then
   * down to the most any of those windows saw the engine serve: a stall inflates some windows'
   * latency and not others, another client all of them. Never below half at once. At a limit of
   * 1 already, the rise is longer requests: the floor is taken again.
   */
  private relieve(window: WindowSummary, floor: WindowSummary, startedAt: number, completedAt: number): void {
    const serving = Math.round((window.inFlight * this.uncrowded(floor)) / window.mean);
    const above = window.inFlight > this.measured() + 0.5;
    const probing = above && !this.slowStart;
    this.servedWhileCrowded = Math.max(this.servedWhileCrowded, serving);
    if (!probing && this.crowdedWindows < this.rules.persistence) return;
    if (this.limit === 1) {
      this.recent = [window];
      this.slowStart = true;
      this.crowdedWindows = 0;
      this.servedWhileCrowded = 0;
      return;
    }
    const to = Math.max(probing ? serving : this.servedWhileCrowded, this.estimate * this.rules.overloadBackoff);
    this.cut(to, startedAt, completedAt, above ? 'probe' : 'known');
  }

  /**
   * The first uncrowded window after a probe's cut, at the new level. A probe's cut reads what
   * the engine served off windows in which the queue it made was draining, and lands a request
   * or two either side of the engine's slots; a few requests too many then queue inside the
   * engine for good, below the tolerance (on 32 slots, 2 queued is a 6% rise), and an
   * interactive request arriving waits behind them. At the new level the engine's queue is
   * steady: any rise beyond noise is that queue, and Little's law says what the engine serves.
   * Trims the limit to it (true) or leaves it (false).
   */
  private settle(window: WindowSummary, floor: WindowSummary, completedAt: number): boolean {
    const uncrowded = this.uncrowded(floor);
    // Not below `queueSlackMs`, as in crowded(), while no interactive request is served: a rise
    // that small is as likely the hosts' event loops, and trimming for it left the limit a request
    // below the engine's slots until the next probe. With interactive requests it errs low: a
    // request too many waits inside the engine, and an interactive one arriving may wait behind it.
    const slack = this.interactiveRecent ? 0 : this.rules.queueSlackMs;
    const risen = window.mean > uncrowded + Math.max(slack, (this.rules.confidence * floor.deviation) / Math.sqrt(window.count));
    const serving = Math.round((window.inFlight * uncrowded) / window.mean);
    if (!risen || serving >= this.limit) return false;
    this.estimate = Math.max(1, serving);
    this.lastCutTo = Math.floor(this.estimate);
    this.probeLevel = this.lastCutTo;
    this.probeFound = this.lastCutTo;
    this.startOver(completedAt);
    return true;
  }

  /**
   * What the engine was last measured to serve: the limit the last probe's cut left; before the
   * first, the most in flight among recent uncrowded windows (slow start has served that much).
   */
  private measured(): number {
    return this.lastCutTo ?? this.recent.reduce((most, window) => Math.max(most, window.inFlight), 0);
  }

  private remember(window: WindowSummary): void {
    this.recent.push(window);
    if (this.recent.length > this.rules.floorWindows) this.recent.shift();
  }

  /**
   * `probe`: the cut that ends a probe (or slow start): what the engine served is known again,
   * and when the next probe may begin. `known`: crowded at what it served before, it serves less
   * now; growth past the new level is a probe, soon.
   */
  private cut(to: number, startedAt: number, completedAt: number, kind: 'probe' | 'known' | 'other' = 'other'): void {
    if (startedAt < this.lastCutAt) return;
    this.estimate = Math.max(1, Math.min(this.estimate, to));
    if (kind === 'probe') {
      // Every probe above what the engine serves queues requests inside it for a few round
      // trips, and in an engine serving in arrival order an interactive request arriving then
      // waits behind them. A probe that ends where the last one did (the engine's capacity has
      // not moved) waits twice as long as the last hold before the next, or with interactive
      // traffic about the longest hold; one that ended elsewhere the shortest: a single reading
      // may be a stall's, and would hold the limit low. The end of slow start, read over
      // `persistence` windows, counts as confirmed.
      const confirmed = this.slowStart || (this.lastCutTo !== undefined && Math.abs(this.estimate - this.lastCutTo) <= Math.max(1, (this.rules.tolerance - 1) * this.lastCutTo));
      this.holdWindows = !confirmed ? this.rules.minHoldWindows : this.interactiveRecent ? this.rules.maxHoldWindows : Math.min(this.rules.maxHoldWindows, 2 * this.holdWindows);
      this.holdLeft = this.holdWindows;
      this.lastCutTo = Math.floor(this.estimate);
      this.probeLevel = this.lastCutTo;
      this.probeFound = this.lastCutTo;
      this.probeEndedAt = completedAt;
      this.settling = true;
    } else if (kind === 'known') {
      this.lastCutTo = Math.min(this.lastCutTo ?? Number.POSITIVE_INFINITY, Math.floor(this.estimate));
      this.holdLeft = Math.min(this.holdLeft, this.rules.minHoldWindows);
    }
    this.slowStart = false;
    this.startOver(completedAt);
  }

  /**
   * The limit changed at `at`: answers to requests sent before describe the old one, and are not
   * evidence (record() drops them); windows and crowding are counted afresh.
   */
  private startOver(at: number): void {
    this.lastCutAt = at;
    this.crowdedWindows = 0;
    this.servedWhileCrowded = 0;
    this.window = new LatencyWindow();
  }
}
