/**
 * How many malloc arenas a long-running Spool process asks glibc for, unless the operator set
 * MALLOC_ARENA_MAX. glibc gives each thread that allocates an arena of its own, up to 8 per core,
 * and keeps what each has held: a service process runs a dozen threads (the engine I/O thread,
 * libuv's pool, V8's helpers). During a 50,000-line batch a second arena held 14–18 MiB in the
 * runs where one was made (not every run makes one); with one arena the batch peaked 7–10 MiB
 * lower, at the same throughput within the rounds' spread (bench/FINDINGS.md, memory).
 */
export const MALLOC_ARENA_MAX = '1';

/** The commands that run until stopped: the service, a processor, the relay. */
const LONG_RUNNING = new Set(['serve', 'processor', 'relay']);

/**
 * Whether this process should start over with MALLOC_ARENA_MAX set: glibc reads it only when a
 * process starts. Not where the operator set it, not for one-off commands, not off Linux, not on
 * a Node without process.execve (before 22.15), and not when a parent holds an IPC channel to
 * this process, which would not survive the exec.
 */
export function needsArenaLimit(argv: readonly string[], env: NodeJS.ProcessEnv, platform: NodeJS.Platform, canExec: boolean): boolean {
  return LONG_RUNNING.has(argv[0] ?? 'serve') && platform === 'linux' && canExec && env.MALLOC_ARENA_MAX === undefined && env.NODE_CHANNEL_FD === undefined;
}

/**
 * Replaces this process (same pid, arguments and Node options) with one under the arena limit,
 * where needed; returns when it is not, or when the exec failed (the process then runs on with
 * glibc's default).
 */
export function startOverWithArenaLimit(): void {
  const argv = process.argv.slice(2);
  if (!needsArenaLimit(argv, process.env, process.platform, typeof process.execve === 'function')) return;
  try {
    process.execve!(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], { ...process.env, MALLOC_ARENA_MAX });
  } catch {
    // Nothing lost but the limit.
  }
}
