/**
 * How much interactive traffic one API process serves on one model
 * (schemas/messages/interactive-load.v1.json), for the inference processors that never see it.
 */
export interface InteractiveLoadMessage {
  model: string;
  source: string;
  arrivals_per_second: number;
  latency_ms: number;
  /** How much later than the engine's floor its requests came lately (median, ms); absent with too few. */
  queued_ms?: number;
  /** With an interactive objective: the p99 of its answers since its previous message (ms, waiting included), and how many. */
  p99_ms?: number;
  answers?: number;
  at: number;
}
