import type { Logger } from 'pino';
import { ExitCode, StartupFailure, oneLine } from './startup-failure.js';

export interface StartupDeadline {
  /** Milliseconds since the epoch after which a dependency that is still away fails the start. */
  readonly at: number;
  /** How the deadline was set, for the message that names it. */
  readonly setting: string;
}

/**
 * Tries to reach a dependency until it answers or the start-up deadline passes: a process that
 * starts before its database waits for it instead of crash-looping. Each failed attempt is logged
 * with its cause; an attempt that hangs is cut off at the deadline.
 */
export async function reachBeforeDeadline(
  attempt: () => Promise<unknown>,
  options: { dependency: string; variable: string; deadline: StartupDeadline; logger: Pick<Logger, 'warn'>; stopped?: () => boolean },
): Promise<void> {
  const { dependency, variable, deadline, logger } = options;
  let delay = 250;
  let lastError: unknown;
  for (let tries = 1; ; tries++) {
    if (options.stopped?.()) return;
    const left = deadline.at - Date.now();
    if (left <= 0) break;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        attempt(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${Math.ceil(left / 1000)} s`)), left);
        }),
      ]);
      return;
    } catch (error) {
      lastError = error;
      const wait = Math.min(delay, Math.max(0, deadline.at - Date.now()));
      logger.warn({ dependency, attempt: tries, retry_in_ms: wait, cause: oneLine(error) }, `${dependency} unreachable; retrying`);
      await new Promise((resolve) => setTimeout(resolve, wait));
      delay = Math.min(delay * 2, 5_000);
    } finally {
      clearTimeout(timer);
    }
  }
  throw new StartupFailure(`${variable}: the ${dependency} could not be reached within ${deadline.setting}: ${oneLine(lastError)}`, ExitCode.unavailable, { cause: lastError });
}
