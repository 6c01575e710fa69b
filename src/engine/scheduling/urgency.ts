/**
 * What kind of work a request is. interactive: a person or program waits on the answer
 * (/compat/v1). batch: a line of a batch, due by its batch's deadline. background: a job with
 * sla "none", which runs on capacity nobody else wants.
 */
export type ServiceClass = 'interactive' | 'batch' | 'background';

/** Work without a deadline: less urgent than any deadline. */
export const LEAST_URGENT = 63;

/**
 * How urgent a deadline is, as a small integer (0 most urgent): the slack left, on a log scale
 * doubling per level from `unitMs` (0: overdue or under a minute, 1: 1–2 min, 2: 2–4 min, …,
 * 11: about 17–34 h). Work in one level counts as equally urgent: a batch due in 23 h and one due
 * in 24 h share capacity fairly, a batch due in 1 h goes before both. A log scale keeps a level
 * as wide as the precision an SLA has, and the level of a waiting batch changes only when its
 * slack halves, so engines given the level as a priority rarely see it change.
 */
export function urgencyLevel(deadline: number | undefined, now: number, unitMs = 60_000): number {
  if (deadline === undefined || !Number.isFinite(deadline)) return LEAST_URGENT;
  const slack = deadline - now;
  if (!(slack > unitMs)) return 0;
  return Math.min(LEAST_URGENT - 1, Math.floor(Math.log2(slack / unitMs)) + 1);
}
