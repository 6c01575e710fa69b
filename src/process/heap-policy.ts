import { setFlagsFromString } from 'node:v8';

/**
 * How large V8 may let the heap of a Spool process grow.
 *
 * V8 sizes its heap for a program that wants throughput and has memory to spare: under steady
 * load the young generation doubles until it reaches 2 × 64 MiB, and after each full collection
 * the old generation may grow to four times what survived before the next one. A Spool process
 * keeps some 25–30 MiB alive however long a batch is, but it allocates tens of kilobytes per line,
 * so the longer a batch runs the closer the heap comes to those ceilings: during a 50,000-line
 * batch it held about 250 MiB, almost all of it garbage not yet collected, against about 120 MiB
 * for 5,000 lines (bench/FINDINGS.md, memory). The young generation's size is a flag a
 * long-running command starts with (process-limits.ts: V8 reads it only at start); the old
 * generation's growth is read at each full collection, so it is set here, at run time.
 */
export interface HeapPolicy {
  /** After a full collection the old generation may grow by this much (percent of what survived) before the next. */
  readonly oldGrowthPercent: number;
}

/** 50% lets the old generation hold half its live size again in garbage. */
export const DEFAULT_HEAP_POLICY: HeapPolicy = { oldGrowthPercent: 50 };

const YOUNG_GENERATION_FLAGS = ['--max-semi-space-size', '--min-semi-space-size', '--semi-space-growth-factor'];
const OLD_GENERATION_FLAGS = ['--heap-growing-percent'];

/** The parts of the heap node was given no flags of its own for (NODE_OPTIONS or its command line): an operator's flags win. */
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

/** Sets the old generation's growth for this process, unless node was given a flag for it. */
export function applyHeapPolicy(policy: HeapPolicy = DEFAULT_HEAP_POLICY, nodeFlags: readonly string[] = nodeFlagsOfThisProcess()): void {
  if (heapPolicyParts(nodeFlags).oldGeneration) setFlagsFromString(`--heap-growing-percent=${policy.oldGrowthPercent}`);
}
