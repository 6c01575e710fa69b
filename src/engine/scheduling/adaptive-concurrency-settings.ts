/** How AdaptiveConcurrency learns a limit; every field but the ceiling has a default (limitRules). */
export interface AdaptiveConcurrencySettings {
  /** ENGINE_CONCURRENCY: the most it ever allows. */
  readonly ceiling: number;
  /** Where it starts; small, so the latency floor is measured before the engine is crowded. */
  readonly initial?: number;
  /** A window's mean latency above floor × tolerance (and beyond its noise) means requests queue inside the engine. */
  readonly tolerance?: number;
  /**
   * A rise must also be at least this many ms: a queue that short inside the engine delays no
   * request measurably, and an engine answering in a fraction of a millisecond (a cache hit, a
   * stand-in) shows rises of that size from the hosts' event loops alone.
   */
  readonly queueSlackMs?: number;
  /** How many standard errors of the two means a rise must exceed to count (noise is not queueing). */
  readonly confidence?: number;
  /** Factor on 429, 503 and timeouts; also the deepest one latency cut may go. */
  readonly overloadBackoff?: number;
  /** Factor when the engine's own gauges report requests waiting. */
  readonly latencyBackoff?: number;
  /** Fewest answers in a window (a window is also at least one limit's worth: a round trip). */
  readonly windowAnswers?: number;
  /** Fewest answers in the first window, which only finds a first floor (also at least a round trip). */
  readonly firstWindowAnswers?: number;
  /** The floor is the lowest window mean among this many recent windows. */
  readonly floorWindows?: number;
  /** Crowded windows in a row before it is cut: a stall of the hosts passes, a queue stays. */
  readonly persistence?: number;
  /** Windows it holds after a cut before growing again: [first, most] (doubling while the engine's capacity stays put). */
  readonly holdWindows?: readonly [number, number];
  /**
   * While interactive requests are being served, the least time between probes above what the
   * last probe found (ms): a probe queues batch work inside the engine for a second or so, and an
   * interactive request arriving then waits behind it.
   */
  readonly interactiveProbeGapMs?: number;
  /** KV-cache usage (0–1) at which it stops growing. */
  readonly kvUsageHigh?: number;
  /** Engine load metrics older than this are ignored. */
  readonly loadStaleMs?: number;
}

/** The settings that shape the rule, each with its default filled in. */
export interface LimitRules {
  readonly tolerance: number;
  readonly queueSlackMs: number;
  readonly confidence: number;
  readonly overloadBackoff: number;
  readonly latencyBackoff: number;
  readonly windowAnswers: number;
  readonly floorWindows: number;
  readonly persistence: number;
  readonly minHoldWindows: number;
  readonly maxHoldWindows: number;
  readonly interactiveProbeGapMs: number;
  readonly kvUsageHigh: number;
  readonly loadStaleMs: number;
}

export function limitRules(settings: AdaptiveConcurrencySettings): LimitRules {
  return {
    tolerance: settings.tolerance ?? 1.1,
    queueSlackMs: settings.queueSlackMs ?? 2,
    confidence: settings.confidence ?? 3,
    overloadBackoff: settings.overloadBackoff ?? 0.5,
    latencyBackoff: settings.latencyBackoff ?? 0.9,
    windowAnswers: settings.windowAnswers ?? 16,
    floorWindows: settings.floorWindows ?? 30,
    persistence: Math.max(1, settings.persistence ?? 3),
    minHoldWindows: settings.holdWindows?.[0] ?? 4,
    maxHoldWindows: settings.holdWindows?.[1] ?? 128,
    interactiveProbeGapMs: settings.interactiveProbeGapMs ?? 300_000,
    kvUsageHigh: settings.kvUsageHigh ?? 0.95,
    loadStaleMs: settings.loadStaleMs ?? 15_000,
  };
}
