import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';

/**
 * How large V8 may let the heap of a Spool process grow.
 *
 * V8 sizes its heap for a program that wants throughput and has memory to spare: under steady
 * load the young generation doubles until it reaches 2 × 64 MiB, and after each full collection
 * the old generation may grow to four times what survived before the next one. A Spool process
 * keeps some 25–30 MiB alive however long a batch is, but it allocates tens of kilobytes per line,
 * so the longer a batch runs the closer the heap comes to those ceilings: during a 50,000-line
 * batch it held about 250 MiB, almost all of it garbage not yet collected, against about 120 MiB
 * for 5,000 lines (bench/FINDINGS.md, memory). These limits keep the heap within a small multiple
 * of the live data whatever the batch's size.
 */
export interface HeapPolicy {
  /** The young generation's semi-space stops growing at this size (MiB); V8 starts it at 1 MiB. */
  readonly semiSpaceMiB: number;
  /** After a full collection the old generation may grow by this much (percent of what survived) before the next. */
  readonly oldGrowthPercent: number;
}

/**
 * An 8 MiB semi-space keeps a line's short-lived objects (its request, response and outcome) out
 * of the old generation nearly as well as V8's 64 MiB at this service's allocation rate; 50% lets
 * the old generation hold half its live size again in garbage.
 */
export const DEFAULT_HEAP_POLICY: HeapPolicy = { semiSpaceMiB: 8, oldGrowthPercent: 50 };

const YOUNG_GENERATION_FLAGS = ['--max-semi-space-size', '--min-semi-space-size', '--semi-space-growth-factor'];
const OLD_GENERATION_FLAGS = ['--heap-growing-percent'];

/** The parts of the policy node was given no flags of its own for (NODE_OPTIONS or its command line): an operator's flags win. */
export function heapPolicyParts(nodeFlags: readonly string[]): { youngGeneration: boolean; oldGeneration: boolean } {
  const names = new Set(nodeFlags.map((flag) => flag.split('=')[0]!.replaceAll('_', '-')));
  const given = (flags: readonly string[]) => flags.some((flag) => names.has(flag));
  return { youngGeneration: !given(YOUNG_GENERATION_FLAGS), oldGeneration: !given(OLD_GENERATION_FLAGS) };
}

/** The flags node was given: its command line's, then NODE_OPTIONS' (node accepts them quoted there). */
export function nodeFlagsOfThisProcess(): string[] {
  const options = (process.env.NODE_OPTIONS ?? '').split(/\s+/).map((flag) => flag.replace(/^["']|["']$/g, ''));
  return [...process.execArgv, ...options.filter(Boolean)];
}

/** The young generation's semi-space (new_space holds two), in bytes: what it may hold before a young collection. */
export function semiSpaceBytes(): number {
  const space = getHeapSpaceStatistics().find((candidate) => candidate.space_name === 'new_space');
  return space ? space.space_used_size + space.space_available_size : 0;
}

/**
 * Applies the policy to this process, the parts node was not given flags for. A long-running
 * command starts with its young generation's size as a flag (process-limits.ts), where it could
 * start over; otherwise, since V8 fixes its largest semi-space when the process starts, the young
 * generation is held by its growth factor instead: after each collection it is 1 (no growth) once
 * the semi-space has reached its size, and V8's default of 2 while it is smaller (V8 shrinks the
 * young generation of a process that idles, which may then grow again up to the same size). The
 * old generation's growth factor is read at each full collection. Returns a function that stops
 * holding the young generation.
 */
export function applyHeapPolicy(
  policy: HeapPolicy = DEFAULT_HEAP_POLICY,
  nodeFlags: readonly string[] = nodeFlagsOfThisProcess(),
): () => void {
  const parts = heapPolicyParts(nodeFlags);
  if (parts.oldGeneration) setFlagsFromString(`--heap-growing-percent=${policy.oldGrowthPercent}`);
  if (!parts.youngGeneration) return () => undefined;
  const limit = policy.semiSpaceMiB * 1024 * 1024;
  let growing = true;
  const hold = () => {
    // Growth doubles: allowed only while the next size is within the limit. The observer hears of
    // collections a little after them, so under a burst of survivors the young generation may
    // still double once or twice past it before it is held.
    const mayGrow = 2 * semiSpaceBytes() <= limit;
    if (mayGrow === growing) return;
    growing = mayGrow;
    setFlagsFromString(`--semi-space-growth-factor=${growing ? 2 : 1}`);
  };
  const observer = new PerformanceObserver(hold);
  observer.observe({ entryTypes: ['gc'] });
  hold();
  return () => {
    observer.disconnect();
    setFlagsFromString('--semi-space-growth-factor=2');
  };
}
