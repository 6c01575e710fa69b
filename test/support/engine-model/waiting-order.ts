// The order in which an engine's scheduler takes waiting requests, as vLLM's
// `--scheduling-policy` sets it: arrival order (fcfs), or the request body's `priority` field,
// lower first, ties by arrival (priority).

export type SchedulingPolicy = 'fcfs' | 'priority';

export interface Ordered {
  /** The request's priority field (absent: 0, vLLM's default); fcfs ignores it. */
  readonly priority: number;
  /** Arrival order, unique and increasing. */
  readonly arrival: number;
}

/** Whether `a` is taken before `b` under the policy. */
export function goesFirst(policy: SchedulingPolicy, a: Ordered, b: Ordered): boolean {
  if (policy === 'priority' && a.priority !== b.priority) return a.priority < b.priority;
  return a.arrival < b.arrival;
}

/**
 * Inserts `entry` into `queue`, kept in the policy's order. A preempted request goes back in by
 * its first arrival, so it is resumed before requests that came after it.
 */
export function insertInOrder<T extends Ordered>(policy: SchedulingPolicy, queue: T[], entry: T): void {
  let index = queue.length;
  while (index > 0 && goesFirst(policy, entry, queue[index - 1]!)) index--;
  queue.splice(index, 0, entry);
}

/** The entry the policy would give up first: the last in its order. */
export function lastInOrder<T extends Ordered>(policy: SchedulingPolicy, entries: readonly T[]): T | undefined {
  let last: T | undefined;
  for (const entry of entries) if (!last || goesFirst(policy, last, entry)) last = entry;
  return last;
}
