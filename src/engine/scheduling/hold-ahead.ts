/** How long a replica that holds requests can be kept busy without this event loop. */
const HANDOVER_MS = 50;

/**
 * Requests given to a replica that can hold them (Replica.holdsRequests) beyond its limit: each
 * is sent the moment one of the running ones ends, instead of once this event loop, often busy
 * with other lines' work, has seen the answer. As many as the replica answers in HANDOVER_MS at
 * its latency floor, at most a quarter of its limit, so a request that comes later and ranks
 * higher waits behind at most that much; interactive ones are sent before them. None before the
 * floor is known.
 */
export function requestsHeldAhead(limit: number, latencyFloorMs: number): number {
  if (!(Number.isFinite(latencyFloorMs) && latencyFloorMs > 0)) return 0;
  return Math.min(Math.floor(limit / 4), Math.floor((limit * HANDOVER_MS) / latencyFloorMs));
}

/**
 * The slots work that can wait may use on a replica: its limit less its part of the interactive
 * reserve, which interactive requests (never held) find free.
 */
export function slotsForWaitingWork(limit: number, reserved: number): number {
  // A reserve computed as 2.0000000001 is 2 slots, not 3.
  return limit - Math.ceil(reserved - 1e-9);
}
