import { heapPolicyParts, nodeFlagsOfThisProcess } from './heap-policy.js';

/**
 * How many malloc arenas a long-running Spool process asks glibc for, unless the operator set
 * MALLOC_ARENA_MAX. glibc gives each thread that allocates an arena of its own, up to 8 per core,
 * and keeps what each has held: a service process runs a dozen threads (the engine I/O thread,
 * libuv's pool, V8's helpers). During a 50,000-line batch a second arena held 14–18 MiB in the
 * runs where one was made (not every run makes one); with one arena the batch peaked about 10 MiB
 * lower (7 at 5,000 lines, 11 for the largest process on Kafka), at the same throughput within
 * the rounds' spread (bench/FINDINGS.md, memory).
 */
export const MALLOC_ARENA_MAX = '1';

/**
 * The size in bytes from which glibc serves an allocation with mmap of its own rather than from
 * the heap, unless the operator set MALLOC_MMAP_THRESHOLD_. glibc's own is 128 KiB at start and
 * rises, up to 32 MiB, each time such a block is freed, so a long-running process serves ever
 * larger blocks from its heap, which can only give memory back from its top: through 5,000
 * batches the heap of a service grew by 5-8 MiB and never shrank. Set, it stays where it is (and
 * glibc no longer moves it): over the same batches the heap stayed where it was after the first
 * few (bench/FINDINGS.md, memory as a service ages).
 */
export const MALLOC_MMAP_THRESHOLD = String(128 * 1024);

/** glibc's settings a long-running process starts under, each unless the operator set it. */
const GLIBC_SETTINGS: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_: MALLOC_MMAP_THRESHOLD };

/**
 * The young generation's semi-space of a long-running process, in MiB (V8 sizes it at start
 * only, for every isolate of the process, so it is set by starting over, never at run time: held
 * through V8's growth factor after each collection instead, it doubled past its limit before the
 * hold took, and the main isolate kept 16 MiB of young generation through a batch). At 2 MiB a
 * 50,000-line batch peaked 8–13 MiB lower; the cost is more young collections, about 7% of the
 * lines per second when the upstream answers at once and nothing measurable against a 100 ms one
 * (bench/FINDINGS.md, memory).
 */
export const SEMI_SPACE_MIB = 2;

/** The commands that run until stopped: the service, a processor, the relay. */
const LONG_RUNNING = new Set(['serve', 'processor', 'relay']);

/** What a process starts over with: environment and node flags added to its own. */
export interface StartOver {
  env: Record<string, string>;
  nodeFlags: string[];
}

/**
 * What this process should start over with, or undefined to run as it is: MALLOC_ARENA_MAX and
 * MALLOC_MMAP_THRESHOLD_, each where the operator set none (on Linux, glibc's), the young generation's size where node was given
 * no young-generation flag (its command line or NODE_OPTIONS). glibc and V8 read both only when
 * a process starts. Never for one-off commands, without process.execve (Node before 22.15), or
 * when a parent holds an IPC channel to this process, which would not survive the exec.
 */
export function startOverWith(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  nodeFlags: readonly string[],
  platform: NodeJS.Platform,
  canExec: boolean,
): StartOver | undefined {
  if (!LONG_RUNNING.has(argv[0] ?? 'serve') || !canExec || env.NODE_CHANNEL_FD !== undefined) return undefined;
  const glibc = platform === 'linux' ? Object.fromEntries(Object.entries(GLIBC_SETTINGS).filter(([name]) => env[name] === undefined)) : {};
  const youngGeneration = heapPolicyParts(nodeFlags).youngGeneration;
  if (Object.keys(glibc).length === 0 && !youngGeneration) return undefined;
  return {
    env: glibc,
    nodeFlags: youngGeneration ? [`--max-semi-space-size=${SEMI_SPACE_MIB}`] : [],
  };
}

/**
 * Replaces this process (same pid, arguments and node flags) with one under the limits, where
 * needed; returns when none is, or when the exec failed (the process then runs on with glibc's
 * and V8's defaults).
 */
export function startUnderProcessLimits(): void {
  const restart = startOverWith(process.argv.slice(2), process.env, nodeFlagsOfThisProcess(), process.platform, typeof process.execve === 'function');
  if (!restart) return;
  try {
    process.execve!(process.execPath, [process.execPath, ...restart.nodeFlags, ...process.execArgv, ...process.argv.slice(1)], { ...process.env, ...restart.env });
  } catch {
    // Nothing lost but the limits.
  }
}
