/** Failures in a row, each with an answer (429, 5xx), that leave a replica out. */
const FAILURES_TO_LEAVE_OUT = 3;

/**
 * Whether a replica is left out of the scheduling after failing: at once when it gave no answer
 * at all, after three transient failures in a row otherwise, for a cooldown; a good answer
 * clears the count, and a health check that passes brings it back before the cooldown ends.
 */
export class ReplicaHealth {
  private downUntil = 0;
  private failures = 0;

  constructor(private readonly cooldownMs: number) {}

  /** Not left out at `now` (epoch ms). */
  isUp(now: number): boolean {
    return this.downUntil <= now;
  }

  answered(): void {
    this.failures = 0;
  }

  failed(unreachable: boolean, now: number): void {
    this.failures += 1;
    if (unreachable || this.failures >= FAILURES_TO_LEAVE_OUT) this.downUntil = now + this.cooldownMs;
  }

  /** Its health check passed. */
  recovered(): void {
    this.downUntil = 0;
    this.failures = 0;
  }
}
