import type { Logger } from 'pino';
import { type Backoff, retryUntil } from '../platform/retry.js';
import { ExitCode, StartupFailure, oneLine } from './startup-failure.js';

/** A dependency the start waits for is asked again soon at first, then at most every 5 s. */
const STARTUP_BACKOFF: Backoff = { firstMs: 250, maxMs: 5_000 };

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
  let lastError: unknown;
  const reached = await retryUntil(
    async () => {
      const left = deadline.at - Date.now();
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          attempt(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`no answer within ${Math.ceil(left / 1000)} s`)), left);
          }),
        ]);
      } finally {
        clearTimeout(timer);
      }
    },
    {
      backoff: STARTUP_BACKOFF,
      deadline: deadline.at,
      ...(options.stopped ? { stopped: options.stopped } : {}),
      onFailure: (error, { attempt: tries, retryInMs }) => {
        lastError = error;
        logger.warn({ dependency, attempt: tries, retry_in_ms: retryInMs, cause: oneLine(error) }, `${dependency} unreachable; retrying`);
      },
    },
  );
  if (reached || options.stopped?.()) return;
  throw new StartupFailure(`${variable}: the ${dependency} could not be reached within ${deadline.setting}: ${oneLine(lastError)}`, ExitCode.unavailable, { cause: lastError });
}
