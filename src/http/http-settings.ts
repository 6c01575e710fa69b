/**
 * The settings the HTTP layer is built with. It declares them itself and is handed their values
 * (the wiring passes the configuration's): the layer reads no configuration of its own.
 */

/** Limits on slow clients, in milliseconds (0: none), and the event streams' heartbeat. */
export interface HttpTimeouts {
  /** From the first byte of a request to the end of its headers. */
  readonly headersMs: number;
  /** Silence allowed while a request (headers or body) is being received. */
  readonly idleMs: number;
  /** From the first byte of a request to the end of its body, however steady. */
  readonly requestMs: number;
  /** How long an idle keep-alive connection is kept open between requests. */
  readonly keepAliveMs: number;
  /** How often a quiet event stream sends a comment, so proxies do not close it. */
  readonly eventStreamHeartbeatMs: number;
}
