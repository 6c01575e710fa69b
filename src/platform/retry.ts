/**
 * Exponential backoff: the delay after the first failure, doubled after each next one up to a cap.
 * With jitter each delay is drawn from its upper half, so that callers who failed together (lines
 * on one engine that went away) do not all come back at the same moment.
 */
export interface Backoff {
  readonly firstMs: number;
  /** The longest delay (default: no cap). */
  readonly maxMs?: number;
  readonly jitter?: boolean;
}

/** How long to wait after the `failures`-th failure in a row (1 for the first). */
export function backoffDelay(backoff: Backoff, failures: number, random: () => number = Math.random): number {
  const delay = Math.min(backoff.maxMs ?? Number.POSITIVE_INFINITY, backoff.firstMs * 2 ** Math.max(0, failures - 1));
  return backoff.jitter ? delay * (0.5 + random() / 2) : delay;
}

export interface RetryOptions {
  readonly backoff: Backoff;
  /** Asked before each attempt: true ends the loop without another. */
  readonly stopped?: () => boolean;
  /** Epoch ms: no attempt starts after it, and no wait runs past it. */
  readonly deadline?: number;
  /** Told of each failure and of the wait before the next attempt. */
  readonly onFailure?: (error: unknown, failure: { readonly attempt: number; readonly retryInMs: number }) => void;
}

/**
 * Runs `attempt` until it succeeds (true), or until the loop is stopped or its deadline passes
 * (false), waiting out the backoff between attempts.
 */
export async function retryUntil(attempt: () => Promise<unknown>, options: RetryOptions): Promise<boolean> {
  const { backoff, stopped, deadline, onFailure } = options;
  for (let attempts = 1; ; attempts++) {
    if (stopped?.()) return false;
    if (deadline !== undefined && deadline - Date.now() <= 0) return false;
    try {
      await attempt();
      return true;
    } catch (error) {
      const delay = backoffDelay(backoff, attempts);
      const remainingMs = deadline === undefined ? Number.POSITIVE_INFINITY : Math.max(0, deadline - Date.now());
      const retryInMs = Math.min(delay, remainingMs);
      onFailure?.(error, { attempt: attempts, retryInMs });
      await new Promise((resolve) => setTimeout(resolve, retryInMs));
      // A wait cut short by the deadline ends the loop: a timer may fire a millisecond early, and
      // the clock read after it must not decide whether one more attempt starts.
      if (delay >= remainingMs) return false;
    }
  }
}
