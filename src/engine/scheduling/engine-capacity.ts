import type { EngineLoad } from '../engine-load-metrics.js';
import { EngineGaugeReadings } from './engine-gauge-readings.js';
import { LatencyFloor } from './latency-floor.js';
import { ThroughputSearch, type SearchPhase } from './throughput-search.js';
import { type RequestResult, type Window, emptyWindow } from './capacity-window.js';

export interface EngineCapacitySettings {
  /** ENGINE_CONCURRENCY (or the replica's `concurrency`): the most it ever allows. */
  readonly ceiling: number;
  /**
   * Where it starts (at most the ceiling). Unset: 16 while interactive requests are being served,
   * and half the ceiling (at least 16) while none are, until the first window is measured. Every
   * doubling below the engine's capacity costs two round trips at a fraction of it (from 4, a
   * 5,000-line batch on a 32-slot engine ran at 95% of the engine in simulation, from 16 at 99%;
   * on a 128-slot engine the three doublings from 16 cost a batch about 0.4 s). Starting above a
   * smaller engine's capacity costs no throughput, only requests waiting inside it until the search
   * walks back: interactive requests served meanwhile would wait behind them (at a ceiling of 128 on
   * a 32-slot engine, an interactive p99 of 1.63× alone against 1.02×).
   */
  readonly initial?: number;
  /**
   * Fewest answers in a throughput window. A window is also at least one limit's worth (a round
   * trip), and long enough that the spread of the engine's latencies leaves its rate within half
   * the flatness (at most ten round trips).
   */
  readonly windowAnswers?: number;
  /** See ThroughputSearchSettings. */
  readonly flatness?: number;
  readonly probeGapMs?: readonly [number, number];
  /**
   * While interactive requests are being served, the least time between probes above the limit
   * found: a probe queues batch work inside a full engine, and an interactive request arriving
   * then waits behind it.
   */
  readonly interactiveProbeGapMs?: number;
  /** KV-cache usage (0–1) at which it stops growing. */
  readonly kvUsageHigh?: number;
  /** Engine gauges older than this are not used: the limit is learned from throughput alone. */
  readonly loadStaleMs?: number;
}

/** Readings at the start of a cruise that say how many requests its limit keeps waiting inside the engine. */
const LOOKAHEAD_READINGS = 4;

/** Where the limit comes from: the engine's own gauges, or the answers' throughput alone. */
export type CapacityMode = 'gauges' | 'throughput';

/**
 * A replica's useful concurrency, learned the way batching engines behave. Pure: every input
 * carries its own time.
 *
 * Every real engine batches: its latency rises with load while its throughput rises faster, so
 * rising latency is not a queue, and a limit that backs off on it starves exactly the engine it
 * should fill. The limit is learned from **throughput** instead (ThroughputSearch): it grows while
 * completions per second rise, holds at the smallest limit within `flatness` of the best (past
 * that, more in flight only queues inside the engine), and probes now and then for a change.
 * Throughput is read through Little's law (in flight / time in the engine), which is steady where
 * counting answers reads the bunching of cohorts.
 *
 * **The engine's gauges** (vLLM's and SGLang's /metrics: requests running, waiting, KV-cache
 * usage), where scraped and fresh, say what throughput can only find out at the next probe: once
 * the limit cruises, the requests waiting inside the engine at that limit are the lookahead that
 * keeps its batch full (a continuous-batching LLM server replaces a few sequences a step and keeps
 * one or two waiting; an embeddings server that batches whatever waits at each step keeps a whole
 * batch waiting), learned as what the search's limit gives rather than set by hand per model and
 * GPU as llm-d's flow control has its operators do. With the batch full (running as many as the
 * engine has lately), more waiting than that lookahead is another client's load or a slower
 * engine: the excess is shed at once. With the batch not full and nothing beyond the lookahead
 * waiting, the engine has room: the next probe up comes at once. A KV cache nearly full forbids
 * probes up. Requests waiting at one reading only may be answers sent again, waiting for the
 * engine's next step: only what waits at two readings in a row counts.
 *
 * **Several processes on one engine** (the Kafka shape: two inference processors, each with its
 * own limit, scrape the same gauges). Each alone would stop where the KV cache reads full and
 * learn the queue their sum makes as its own lookahead (two limits of 32 on a 32-slot engine, 32
 * waiting, every interactive request behind them). So a process's lookahead is at most what its
 * limit sends beyond the running batch, and an excess is shed by each process in proportion to
 * its part of what the engine holds, so processes reading the same gauges shed it once between
 * them. The interactive reserve counts as well: the slots of this process's part that its own
 * interactive requests do not use should show free in the engine (`freeWanted`); while the engine
 * runs its full batch they are taken, and are shed like requests waiting beyond the lookahead.
 * The engine's full batch is what it runs while requests wait (slots held free would otherwise
 * read, ten seconds on, as a smaller engine).
 *
 * **The knee is what the engine holds.** Batch work runs within the limit less the slots kept
 * free for interactive requests (InteractiveHeadroom), so the search's rate flattens once that
 * work alone fills the engine: at the engine's slots plus the reserve, less the interactive
 * requests then running. Left so, the search takes the reserve back, and every interactive request
 * queues behind a full engine (a 32-slot engine: a limit of 35, a reserve of 3, 32 batch requests
 * sent, an interactive p99 at 1.2–1.3× alone). Where the search settles on a knee it found, the
 * slots its value then held free (taken off the limit before, and reserved but not used by an
 * interactive request) come off the limit: the limit is what the engine holds at its knee, and the
 * reserve lies within it. A cruise at a bound found no knee, and changes nothing.
 *
 * 429, 503 and timeouts halve it at once. Latency is not a signal here; interactive traffic is
 * protected against an operator's objective (InteractiveObjective). The latency floor is still
 * tracked (LatencyFloor) for the hold-ahead and the yield to other processes.
 */
export class EngineCapacity {
  private estimate: number;
  private search: ThroughputSearch;
  private mode: CapacityMode = 'throughput';
  private load: { value: EngineLoad; at: number } | undefined;
  private readonly gauges = new EngineGaugeReadings();
  /** Waiting requests the cruising limit keeps inside the engine (its first readings' mean), and how many readings made it. */
  private lookahead: { sum: number; readings: number } | undefined;
  /** Readings in a row the engine had room. */
  private roomReadings = 0;
  private window: Window = emptyWindow(undefined, 0);
  /** Slots free at each value the search measured since its last knee, by value (see the class comment). */
  private unusedAt = new Map<number, number>();
  /** The slots the search's value held free at its last knee: taken off the limit. */
  private heldFree = 0;
  /** Answers to requests sent before this are not evidence for the current setting. */
  private changedAt = Number.NEGATIVE_INFINITY;
  private lastUpProbeAt = Number.NEGATIVE_INFINITY;
  private lastOverloadAt = Number.NEGATIVE_INFINITY;
  private interactiveRecent = false;
  /** Where an unset `initial` starts while no interactive request is being served (see EngineCapacitySettings.initial). */
  private readonly boldStart: number | undefined;
  /** Slots given back to another process's interactive requests (yieldSlot): a cap, until it expires or interactive traffic stops. */
  private held: { below: number; until: number; floor: number } | undefined;
  private readonly floor = new LatencyFloor();
  private readonly windowAnswers: number;
  private readonly flatness: number;
  private readonly interactiveProbeGapMs: number;
  private readonly kvUsageHigh: number;
  private readonly loadStaleMs: number;
  readonly ceiling: number;

  constructor(settings: EngineCapacitySettings) {
    if (!(Number.isFinite(settings.ceiling) && settings.ceiling >= 1)) throw new Error(`a concurrency ceiling must be at least 1, not ${settings.ceiling}`);
    this.ceiling = Math.floor(settings.ceiling);
    this.boldStart = settings.initial === undefined ? Math.min(this.ceiling, Math.max(16, Math.floor(this.ceiling / 2))) : undefined;
    this.estimate = this.boldStart ?? Math.min(this.ceiling, Math.max(1, settings.initial!));
    this.windowAnswers = settings.windowAnswers ?? 8;
    this.flatness = settings.flatness ?? 0.03;
    this.interactiveProbeGapMs = settings.interactiveProbeGapMs ?? 300_000;
    this.kvUsageHigh = settings.kvUsageHigh ?? 0.95;
    this.loadStaleMs = settings.loadStaleMs ?? 3_000;
    this.search = new ThroughputSearch({ least: 1, most: this.ceiling, initial: this.estimate, flatness: this.flatness, ...(settings.probeGapMs ? { probeGapMs: settings.probeGapMs } : {}) });
  }

  /** Requests to allow in flight now: an integer from 1 to the ceiling. */
  get limit(): number {
    const learned = Math.max(1, Math.min(this.ceiling, Math.floor(this.estimate - this.heldFreeNow())));
    return this.held ? Math.min(learned, this.held.below) : learned;
  }

  /** The slots held free that come off the limit now: none while a probe up goes a step past the knee itself, or it could not tell a grown engine from the knee. */
  private heldFreeNow(): number {
    return this.search.phase === 'probe-up' ? 0 : this.heldFree;
  }

  /** Whether fresh engine gauges guard the limit now, or throughput alone sets it. */
  get source(): CapacityMode {
    return this.mode;
  }

  /** Requests the cruising limit keeps waiting inside the engine, as its gauges show (undefined without them, or while searching). */
  get lookaheadRequests(): number | undefined {
    return this.mode === 'gauges' && this.lookahead && this.lookahead.readings > 0 ? this.lookahead.sum / this.lookahead.readings : undefined;
  }

  /** Where the search stands: startup, search, cruise or a probe. */
  get phase(): SearchPhase {
    return this.search.phase;
  }

  /** The latency floor learned so far, ms (Infinity before the first window). */
  get latencyFloorMs(): number {
    return this.floor.floorMs;
  }

  /** The mean latency of an uncrowded window, ms (Infinity before the first window). */
  get uncrowdedLatencyMs(): number {
    return this.floor.uncrowdedMs;
  }

  record(result: RequestResult): void {
    if (result.outcome === 'failed') return;
    const completedAt = result.startedAt + Math.max(0, result.latencyMs);
    if (this.held && completedAt >= this.held.until) this.held = undefined;
    if (this.mode === 'gauges' && (!this.load || completedAt - this.load.at > this.loadStaleMs)) this.mode = 'throughput';
    if (result.outcome === 'overloaded' || result.outcome === 'timeout') {
      // One cut per round of requests sent after the last: answers to those sent before describe the old limit.
      if (result.startedAt < this.lastOverloadAt) return;
      this.lastOverloadAt = completedAt;
      this.search.overloaded(completedAt);
      this.follow(completedAt);
      return;
    }
    this.floor.add(result.latencyMs);
    if (result.startedAt < this.changedAt) return;
    const window = this.window;
    window.answers += 1;
    window.latency += Math.max(0, result.latencyMs);
    window.inFlight += result.inFlight;
    window.usage += Math.min(1, (result.inFlight + (result.reserved ?? 0)) / Math.max(1, result.limit ?? this.limit));
    // Batch work is held to the limit less the whole slots of the reserve (slotsForWaitingWork).
    window.unused += Math.max(0, Math.ceil((result.reserved ?? 0) - 1e-9) - (result.interactive ?? 0));
    window.endAt = Math.max(window.endAt, completedAt);
    if (window.answers < this.windowLength()) return;
    this.closeWindow();
  }

  /**
   * Answers a window needs: the mean of n latencies of coefficient of variation cv has a relative
   * spread of about cv/√n, and two windows' rates must differ by less than the flatness to be told
   * apart.
   */
  private windowLength(): number {
    const limit = this.limit;
    const cv = this.floor.variation;
    const forNoise = Number.isFinite(cv) ? Math.ceil(((2 * cv) / this.flatness) ** 2) : 0;
    // Whole round trips (each request in flight answers once per round trip), at most ten.
    return limit * Math.min(10, Math.ceil(Math.max(this.windowAnswers, forNoise) / limit));
  }

  /**
   * Whether interactive requests are being served beside the work this limit holds back (at `at`):
   * a probe above the engine's capacity then delays them, so such probes wait
   * `interactiveProbeGapMs`, and a start not yet measured is the cautious one.
   */
  interactiveTraffic(recent: boolean, at = Number.NEGATIVE_INFINITY): void {
    this.interactiveRecent = recent;
    if (!recent) this.held = undefined;
    // Before the first window: a start above the engine's capacity would queue batch work ahead of
    // the interactive requests being served; with none served, it gets a batch the engine at once.
    if (this.boldStart !== undefined && this.search.untouched) {
      const before = this.search.value;
      this.search.startAt(recent ? Math.min(this.ceiling, 16) : this.boldStart);
      if (this.search.value === before) return;
      // What was sent at the old start describes that start: answers to it are not the new one's.
      this.estimate = this.search.value;
      this.changed(at);
    }
  }

  /**
   * Another process's interactive requests wait inside the engine for a slot (on the Kafka shape
   * the API says so; see InteractiveYield): one request fewer, held while interactive requests
   * are served or until the next probe may start; not below half the limit at the first yield.
   * True when the limit went down.
   */
  yieldSlot(at: number): boolean {
    const limit = this.limit;
    const floor = this.held?.floor ?? Math.max(1, Math.ceil(limit / 2));
    if (limit - 1 < floor) return false;
    this.held = { below: limit - 1, until: at + this.interactiveProbeGapMs, floor };
    return true;
  }

  /**
   * Load gauges scraped from the engine at `at` (see engineLoadFrom). `inUse`: Spool's requests
   * on the replica then, with the slots kept free for interactive requests. `freeWanted`: the
   * slots of this process's part of the interactive reserve that interactive requests (its own,
   * and on average other processes') leave unused, which the engine should show free.
   */
  observeLoad(load: EngineLoad, at: number, inUse: number = this.limit, freeWanted = 0): void {
    this.load = { value: load, at };
    if (this.held && at >= this.held.until) this.held = undefined;
    if (load.waiting === undefined) return;
    this.mode = 'gauges';
    const { running, waiting, peak, short } = this.gauges.read(load.running ?? 0, load.waiting, freeWanted);
    // While it searches, throughput decides; the lookahead is what the limit it settles on keeps
    // waiting, once the change's own round trip has passed (the queue a probe made drains first).
    if (this.search.phase !== 'cruise') {
      this.lookahead = undefined;
      return;
    }
    // With the limit not in use the engine's queue is not this process's doing, and says nothing
    // of what its limit keeps waiting: readings of an idle replica are not judged.
    if (inUse < Math.ceil(0.9 * this.limit) || this.window.startAt === undefined) return;
    // What this process's limit alone keeps waiting is at most what it sends beyond the engine's
    // running batch: where other processes send to the same engine (the Kafka shape's inference
    // processors, each with its own limit), the queue their sum makes is not a lookahead any of
    // them may keep.
    const limit = this.limit;
    const own = Math.min(waiting, Math.max(0, limit - running));
    if (!this.lookahead || this.lookahead.readings < LOOKAHEAD_READINGS) {
      this.lookahead = { sum: (this.lookahead?.sum ?? 0) + own, readings: (this.lookahead?.readings ?? 0) + 1 };
      return;
    }
    const lookahead = this.lookahead.sum / this.lookahead.readings;
    // Slots held free below the knee, or for interactive requests, are kept free by design, not
    // room to probe for.
    const full = running >= peak - Math.max(1, Math.floor(0.05 * peak)) - Math.max(this.heldFreeNow(), freeWanted);
    // What waits beyond the lookahead, and the reserved slots the engine's batch has taken: with
    // the gauges cruising at the engine's batch (a KV cache full stops growth, and no knee is
    // searched), work held to the limit less the reserve still fills every slot where the limit
    // lies above the batch, and where several processes share the engine (the Kafka shape), their
    // parts of the reserve are free only if their sum leaves them free.
    const excess = waiting - lookahead + short;
    if (full && excess > Math.max(2, 0.1 * peak)) {
      // Another client's load, or a slower engine: what waits beyond the lookahead only queues.
      // This process sheds its share of it (its requests of all the engine holds), so that
      // processes reading the same gauges at once shed the excess once between them, not each.
      const share = Math.min(1, limit / Math.max(1, running + load.waiting));
      this.search.cruiseAt(Math.max(1, Math.floor(Math.min(this.estimate, inUse + this.heldFree) - Math.ceil(excess * share))), at);
      this.follow(at);
      return;
    }
    // Room: the batch runs fewer than it has lately (another client left), or less waits than the
    // lookahead (the engine takes more per step). An engine full to exactly the limit with nothing
    // waiting shows neither; the probes find out.
    const room = (!full || excess < -0.5) && excess <= 0 && (load.kvUsage ?? 0) < this.kvUsageHigh;
    this.roomReadings = room ? this.roomReadings + 1 : 0;
    if (this.roomReadings >= 2) {
      this.roomReadings = 0;
      // Room calls for a probe up; where probes up must wait (interactive traffic), it would only
      // bring the next probe down forward, every second or two, each a window of the batch lost.
      if (this.mayProbeUp(at)) this.search.probeSoon(at);
    }
  }

  /** Whether a probe above the limit may start at `at`: interactive traffic makes it wait `interactiveProbeGapMs` after the last. */
  private mayProbeUp(at: number): boolean {
    return !this.interactiveRecent || at - this.lastUpProbeAt >= this.interactiveProbeGapMs;
  }

  /** The search moved: the limit follows, and what was measured before describes the old one. */
  private follow(at: number): void {
    this.estimate = this.search.value;
    this.lookahead = undefined;
    this.changed(at);
  }

  private closeWindow(): void {
    const window = this.window;
    this.window = emptyWindow(window.endAt, window.endAt);
    // The first window after a change is the change itself; a window whose limit was not in use
    // is limited by the work Spool had, not by the engine: neither says what the limit serves.
    if (window.startAt === undefined || window.usage / window.answers < 0.9) return;
    const at = window.endAt;
    // While slots are held for another process, the throughput measured is the held limit's.
    if (this.held && this.held.below < this.search.value) return;
    const kvFull = this.mode === 'gauges' && (this.load?.value.kvUsage ?? 0) >= this.kvUsageHigh;
    const mayProbeUp = this.mayProbeUp(at);
    // Little's law: the engine completes requests at (requests in flight) / (time each spends in
    // it). Counting answers between two answers' times instead reads the bunching of the cohorts
    // requests keep (they go out as others come back), ±10% from one window to the next past the
    // engine's slots; the mean of every answer's time is steady.
    const servedMs = window.latency / (window.inFlight / window.answers);
    const searching = this.search.phase === 'startup' || this.search.phase === 'search';
    // Slots free at this value of the search: those taken off its limit, and those reserved for
    // interactive requests that none used.
    this.unusedAt.set(this.search.value, this.heldFreeNow() + window.unused / window.answers);
    const knees = this.search.kneesFound;
    const moved = this.search.measured(window.answers, servedMs, at, { mayGrow: !kvFull, mayProbeUp, belowKnee: this.heldFree > 0 });
    if (this.search.kneesFound !== knees) {
      const free = this.unusedAt.get(this.search.value);
      if (free !== undefined) this.heldFree = Math.round(free);
      this.unusedAt.clear();
    }
    // Startup and the search went above the engine's capacity as a probe up does: the next probe
    // up waits as long after they settle (with interactive requests served, 5 minutes), or it
    // lands in the interactive traffic a batch started beside (at 4× a 32-slot engine's slots,
    // one probe in a 20 s window put the p99 at 1.45× alone). That holds where the search settles
    // on the value it had too (a startup a full KV cache stopped): counted only when the value
    // moved, it let a probe up start a second or two later (bench/FINDINGS.md, 2026-11-29).
    if (this.search.phase === 'probe-up' || (searching && this.search.phase === 'cruise')) this.lastUpProbeAt = at;
    if (!moved && this.search.kneesFound === knees) return;
    this.follow(at);
  }

  /** The setting changed at `at`: answers to requests sent before describe the old one. */
  private changed(at: number): void {
    this.changedAt = at;
    // The first window after a change is dropped: requests sent as the limit rose met an engine
    // still holding the old load, and answered faster than the new one lets them (read through
    // Little's law, a doubling past the engine's slots looked 25% faster than it was).
    this.window = emptyWindow(undefined, at);
  }
}
