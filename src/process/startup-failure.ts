/**
 * The exit codes of the spool command (sysexits-style, so that supervisors and scripts can tell a
 * configuration mistake from a dependency that is still away). README.md lists them.
 */
export const ExitCode = {
  /** The command ran and stopped cleanly. */
  ok: 0,
  /** Anything not foreseen below: a defect. */
  unexpected: 1,
  /** Bad command line. */
  usage: 2,
  /** A Node.js version Spool does not run on (node-version.ts): checked before anything else loads. */
  unsupportedNode: 3,
  /** A dependency (event store, Kafka) stayed unreachable until the start-up deadline. */
  unavailable: 69,
  /** DATA_DIR (or a file under it) cannot be created or written. */
  cannotCreate: 73,
  /** Stopping took longer than SHUTDOWN_TIMEOUT_SECONDS; unfinished work is redone at the next start. */
  shutdownTimedOut: 75,
  /** A setting is wrong: a bad value, a missing file, a host or port that cannot be listened on. */
  config: 78,
  /** A second SIGINT during shutdown (128 + 2, as a shell reports it). */
  interrupted: 130,
  /** A second SIGTERM during shutdown (128 + 15). */
  terminated: 143,
} as const;

/** A start that cannot go on, with the one line that says why and the exit code that classifies it. */
export class StartupFailure extends Error {
  override readonly name = 'StartupFailure';
  constructor(
    message: string,
    readonly exitCode: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The message of a thrown value, on one line. */
export function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.replace(/\s*\n\s*/g, '; ').trim();
}

/** Runs a step that reads a configured file (JOBS_FILE, FLEET_FILE): its failure is a configuration mistake. */
export function asConfigurationFailure<T>(action: () => T): T {
  const fail = (error: unknown): never => {
    if (error instanceof StartupFailure) throw error;
    throw new StartupFailure(oneLine(error), ExitCode.config, { cause: error });
  };
  try {
    const result = action();
    return (result instanceof Promise ? result.catch(fail) : result) as T;
  } catch (error) {
    return fail(error);
  }
}
