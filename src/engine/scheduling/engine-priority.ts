import type { ReplicaKind } from '../replica.js';
import { LEAST_URGENT, type ServiceClass, urgencyLevel } from './urgency.js';

export interface PriorityOptions {
  /** SGLang started with --schedule-low-priority-values-first (the vLLM convention). */
  readonly lowValuesFirst?: boolean;
}

/** Rank 0 goes first: interactive, then batches by urgency level, then background. */
const BACKGROUND_RANK = LEAST_URGENT + 2;

function rank(serviceClass: ServiceClass, deadline: number | undefined, now: number): number {
  if (serviceClass === 'interactive') return 0;
  if (serviceClass === 'background') return BACKGROUND_RANK;
  return 1 + urgencyLevel(deadline, now);
}

/**
 * The request body field that tells an engine scheduling by priority what goes first, in its own
 * convention; undefined for servers without one (a generic OpenAI-compatible server may reject
 * unknown fields).
 * - vLLM (`--scheduling-policy priority`): `priority`, an integer, lower is scheduled earlier,
 *   ties by arrival; a waiting request may preempt running ones of a larger value.
 * - SGLang (`--enable-priority-scheduling`): `priority`, an integer, larger is scheduled earlier
 *   unless the server runs with `--schedule-low-priority-values-first`.
 * Batch ranks are urgency levels, not raw deadlines: a few coarse values, so engines keep arrival
 * order within a level (Spool's own order) and preempt only for a clearly more urgent request.
 */
export function enginePriority(
  kind: ReplicaKind,
  request: { readonly serviceClass: ServiceClass; readonly deadline?: number },
  now: number,
  options: PriorityOptions = {},
): { priority: number } | undefined {
  const value = rank(request.serviceClass, request.deadline, now);
  if (kind === 'vllm') return { priority: value };
  if (kind === 'sglang') return { priority: options.lowValuesFirst ? value : BACKGROUND_RANK - value };
  return undefined;
}
