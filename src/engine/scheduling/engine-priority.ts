import { type ReplicaKind, httpEngineKind } from '../engine-kinds.js';
import { LEAST_URGENT, type ServiceClass, urgencyLevel } from './urgency.js';

export interface PriorityOptions {
  /** A higher-first server (SGLang) started the other way round (--schedule-low-priority-values-first). */
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
 * The request body field that tells an engine scheduling by priority what goes first, in its
 * kind's convention (engine-kinds.ts: vLLM lower first; SGLang larger first unless started with
 * low values first); undefined for kinds without one (a generic OpenAI-compatible server may
 * reject unknown fields).
 * Batch ranks are urgency levels, not raw deadlines: a few coarse values, so engines keep arrival
 * order within a level (Spool's own order) and preempt only for a clearly more urgent request.
 */
export function enginePriority(
  kind: ReplicaKind,
  request: { readonly serviceClass?: ServiceClass | undefined; readonly deadline?: number | undefined },
  now: number,
  options: PriorityOptions = {},
): { priority: number } | undefined {
  const order = httpEngineKind(kind)?.priority;
  if (!order) return undefined;
  const value = rank(request.serviceClass ?? 'interactive', request.deadline, now);
  return { priority: order === 'lower-first' || options.lowValuesFirst ? value : BACKGROUND_RANK - value };
}
