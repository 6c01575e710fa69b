/**
 * What one answer tells a replica's learned capacity (EngineCapacity), and the windows of answers
 * its throughput is read over.
 */

/** How a request ended: answered (any answer but 429/503), overloaded (429/503), timeout, failed (other). */
export type RequestOutcome = 'answered' | 'overloaded' | 'timeout' | 'failed';

export interface RequestResult {
  /** When it was sent, epoch ms. */
  readonly startedAt: number;
  /** How long the engine took. */
  readonly latencyMs: number;
  readonly outcome: RequestOutcome;
  /** Requests in flight on the replica when it was sent, itself included. */
  readonly inFlight: number;
  /** Slots of the replica kept free for interactive requests when it was sent: in use as much as filled ones. */
  readonly reserved?: number;
  /** The limit when it was sent (the limit now when absent). */
  readonly limit?: number;
  /** Interactive requests in flight on the replica when it was sent (absent: none). */
  readonly interactive?: number;
}

export const emptyWindow = (startAt: number | undefined, endAt: number): Window => ({ answers: 0, latency: 0, inFlight: 0, usage: 0, unused: 0, startAt, endAt });

export interface Window {
  answers: number;
  /** Sums over its answers of their latencies and of the requests in flight when each was sent. */
  latency: number;
  inFlight: number;
  /** Sum over its answers of the share of the limit in use when each was sent. */
  usage: number;
  /** Sum over its answers of the reserved slots no interactive request used when each was sent. */
  unused: number;
  /** Where it starts: the previous window's end; undefined for the first window after a change (spoiled by it). */
  startAt: number | undefined;
  endAt: number;
}
