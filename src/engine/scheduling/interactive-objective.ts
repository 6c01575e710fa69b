import { nearestRank } from '../../platform/percentile.js';

export interface InteractiveObjectiveSettings {
  /** The objective: interactive requests answered within this at the 99th percentile, ms. */
  readonly p99Ms: number;
  /**
   * Answers a judgement needs, all of requests sent since the batch concurrency last changed
   * (fewer: no judgement); a miss also needs two of them past the objective.
   */
  readonly leastAnswers?: number;
  /** Answers it takes to judge there is room to grow (more than to judge a miss: see judge()). */
  readonly roomAnswers?: number;
  /** The batch concurrency goes to this fraction of what was in flight when the objective is missed. */
  readonly cut?: number;
  /**
   * The p99 the control aims at, as a fraction of the objective: a control that balances exactly
   * at the objective leaves the p99 of a given minute above it about half the time.
   */
  readonly aim?: number;
  /** It grows (by `growth` of itself, at least one) while the p99 stays below this fraction of the aim. */
  readonly margin?: number;
  readonly growth?: number;
  /** No interactive answer for this long: nothing to protect, no cap. */
  readonly idleMs?: number;
  /** Answers kept for the measured p99 shown in /metrics: those of the last this many ms. */
  readonly reportWindowMs?: number;
}

/**
 * Interactive protection against an explicit objective: batch work gets every slot the objective
 * allows and no more. On a batching engine every request in the batch slows every other a little,
 * so beside live traffic the question is not whether the engine is full but how full it may be
 * while interactive requests are still answered in time; only the operator can say what "in time"
 * is (a p99 per model), and only measuring says how much batch work that leaves.
 *
 * Additive increase, multiplicative decrease on the batch concurrency (the batch and background
 * requests the scheduler may keep in flight across the model's replicas), judged on the
 * interactive answers since the last change only (older ones describe the old concurrency), against
 * an aim a little under the objective (`aim`, 98% of it):
 * - more answers above the aim than 1% of them could be by chance: down to `cut` of what
 *   was in flight, or further where their p90 is past it too (not while none is in flight: then
 *   the batch is not the cause);
 * - every one of at least `roomAnswers` answers below `margin` of it: up by `growth`, at least one;
 * - in between: held.
 * No cap while the objective holds from the start, and none once interactive traffic stops.
 * Pure: every input carries its own time.
 */
export class InteractiveObjective {
  private since: number[] = [];
  /** Since the last change, what other processes reported of their interactive answers: how many, and the highest p99 among their reports. */
  private reported = { answers: 0, p99Ms: 0 };
  /** Answers since the last report() to other processes. */
  private unreported: number[] = [];
  private recent: Array<{ at: number; latencyMs: number }> = [];
  private cap = Number.POSITIVE_INFINITY;
  private lastAnswerAt = Number.NEGATIVE_INFINITY;
  /** When the cap last changed: answers to requests sent before it describe the old cap. */
  private changedAt = Number.NEGATIVE_INFINITY;
  private readonly leastAnswers: number;
  private readonly roomAnswers: number;
  private readonly cut: number;
  /** What misses are judged against: `aim` of the objective, ms. */
  private readonly target: number;
  private readonly margin: number;
  private readonly growth: number;
  private readonly idleMs: number;
  private readonly reportWindowMs: number;

  constructor(readonly settings: InteractiveObjectiveSettings) {
    if (!(settings.p99Ms > 0 && Number.isFinite(settings.p99Ms))) throw new Error(`an interactive p99 objective must be a positive number of ms, not ${settings.p99Ms}`);
    this.leastAnswers = settings.leastAnswers ?? 10;
    this.roomAnswers = Math.max(this.leastAnswers, settings.roomAnswers ?? 100);
    this.cut = settings.cut ?? 0.9;
    this.target = (settings.aim ?? 0.98) * settings.p99Ms;
    this.margin = settings.margin ?? 0.95;
    this.growth = settings.growth ?? 0.05;
    this.idleMs = settings.idleMs ?? 60_000;
    this.reportWindowMs = settings.reportWindowMs ?? 60_000;
  }

  /** An interactive request answered at `at` after `latencyMs` (as its caller saw it: waiting included). */
  answered(at: number, latencyMs: number): void {
    if (!(latencyMs >= 0)) return;
    this.lastAnswerAt = Math.max(this.lastAnswerAt, at);
    // Judged only on requests sent under the cap as it is: one sent before a cut, into an engine
    // the old cap filled, is no evidence against the new one (judged on those, a fast run of cuts
    // went on cutting after the engine had emptied).
    if (at - latencyMs >= this.changedAt) this.since.push(latencyMs);
    if (this.unreported.length < MAX_UNREPORTED) this.unreported.push(latencyMs);
    this.recent.push({ at, latencyMs });
    while (this.recent.length > 0 && this.recent[0]!.at < at - this.reportWindowMs) this.recent.shift();
  }

  /**
   * The most batch work to keep in flight now (Infinity: no cap), judging the answers since the
   * last change once there are enough. `batchInFlight`: batch and background requests in flight now.
   */
  batchCap(at: number, batchInFlight: number): number {
    if (at - this.lastAnswerAt > this.idleMs) {
      this.cap = Number.POSITIVE_INFINITY;
      this.changed(at);
      return this.cap;
    }
    // Its own answers where it has enough, else what other processes reported (the API's, on the
    // Kafka shape): the highest of their reports' p99s, which errs towards the objective.
    const own = this.since.length >= this.leastAnswers;
    const judged = own ? this.judge(this.since) : this.reported.answers >= REPORTED_LEAST_ANSWERS ? this.judgeReported() : undefined;
    if (judged === undefined) return this.cap;
    // With no batch work in flight the batch is not what misses the objective: nothing to cut.
    if (judged === 'missed' && batchInFlight > 0) {
      this.cap = Math.max(1, Math.floor(Math.min(this.cap, batchInFlight) * this.cutFor(own ? nearestRank(this.since, 0.9) : this.reported.p99Ms)));
      this.changed(at);
    } else if (judged === 'room' && Number.isFinite(this.cap)) {
      this.cap += Math.max(1, Math.ceil(this.cap * this.growth));
      this.changed(at);
    } else if (this.since.length >= 4 * this.roomAnswers) this.since = this.since.slice(-this.roomAnswers);
    else if (this.reported.answers >= 4 * this.roomAnswers) this.reported = { answers: 0, p99Ms: 0 };
    return this.cap;
  }

  /**
   * Missed: more answers above the aim than 1% of them could be by chance (two at least,
   * and more than the binomial count's mean and two standard deviations: 2 of 10 to 30, 3 of 100;
   * a clear miss is seen in ten answers, a second or so of traffic), not merely the slowest of a few
   * dozen above it, which a p99 exactly at the objective gives a quarter of the time in 30. Room:
   * none of at least `roomAnswers` above `margin` of it. The two tests must balance where the p99
   * is the aim: judged on the slowest of 30 (their p97), room was found while 2–3% of the
   * answers were late, fewer than a miss needs, and the cap settled where the p99 was 1.3× the
   * objective (bench/FINDINGS.md). In 100 answers none above the margin happens a fifth of the time
   * when 1.5% are above it, and three above the objective, the miss, a tenth of the time when 1%
   * are: growth by a twentieth against cuts by a tenth balances about there.
   */
  private judge(latencies: readonly number[]): 'missed' | 'room' | 'held' {
    const n = latencies.length;
    let above = 0;
    let slowest = 0;
    for (const latency of latencies) {
      if (latency > this.target) above += 1;
      if (latency > slowest) slowest = latency;
    }
    // Two at least: from ten answers on, one alone past the aim is what a p99 at it gives one time in ten.
    if (above >= 2 && above > 0.01 * n + 2 * Math.sqrt(n * 0.01 * 0.99)) return 'missed';
    return n >= this.roomAnswers && slowest < this.margin * this.target ? 'room' : 'held';
  }

  /**
   * How far a miss cuts: `cut`, or further where even the judged answers' p90 (`p90Ms`; of other
   * processes' reports, their p99) is past the aim (by the ratio of the aim to it, down to half). A cut of a tenth at a time needs a judgement
   * of 30 fresh answers each (seconds at a few requests a second), and from a limit learned with no
   * objective in view the p99 stayed far past it for the first minute (bench/FINDINGS.md). The
   * latency of a batching engine grows more slowly than its batch, so cutting the batch by the
   * latency's ratio cuts less than the batch that made the difference, never more.
   */
  private cutFor(p90Ms: number): number {
    return p90Ms > this.target ? Math.max(0.5, Math.min(this.cut, this.target / p90Ms)) : this.cut;
  }

  private judgeReported(): 'missed' | 'room' | 'held' {
    const p99 = this.reported.p99Ms;
    if (p99 > this.target) return 'missed';
    return this.reported.answers >= this.roomAnswers && p99 < this.margin * this.target ? 'room' : 'held';
  }

  /**
   * Another process's interactive answers since its previous report: `answers` of them, with this
   * p99 (on the Kafka shape the API serves /compat/v1 and the inference processors, which hold
   * the batch work, never see those requests).
   */
  reportedBy(at: number, p99Ms: number, answers: number): void {
    if (!(p99Ms >= 0 && answers > 0)) return;
    this.lastAnswerAt = Math.max(this.lastAnswerAt, at);
    this.reported = { answers: this.reported.answers + answers, p99Ms: Math.max(this.reported.p99Ms, p99Ms) };
    // What /metrics shows here: the reports' p99s stand for the answers this process never sees.
    this.recent.push({ at, latencyMs: p99Ms });
    while (this.recent.length > 0 && this.recent[0]!.at < at - this.reportWindowMs) this.recent.shift();
  }

  /** This process's answers since the last call, for other processes: their p99 and how many (undefined: none). Each call starts anew. */
  report(): { p99Ms: number; answers: number } | undefined {
    const answers = this.unreported;
    this.unreported = [];
    return answers.length > 0 ? { p99Ms: nearestRank(answers, 0.99), answers: answers.length } : undefined;
  }

  private changed(at: number): void {
    this.changedAt = at;
    this.since = [];
    this.reported = { answers: 0, p99Ms: 0 };
  }

  /** The p99 of the interactive answers of the last `reportWindowMs` (undefined without any). */
  measuredP99(at: number): number | undefined {
    const latencies = this.recent.filter((answer) => answer.at >= at - this.reportWindowMs).map((answer) => answer.latencyMs);
    return latencies.length > 0 ? nearestRank(latencies, 0.99) : undefined;
  }
}

/**
 * Answers other processes must have reported before their p99s are judged: a report's p99 is
 * nearly the slowest of its answers, so judged on ten of them a miss would be their p90's.
 */
const REPORTED_LEAST_ANSWERS = 30;

/** The most answers kept between two reports to other processes (a second's worth at any sane rate). */
const MAX_UNREPORTED = 10_000;
