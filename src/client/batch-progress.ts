// A batch's progress as the client shows it, from the events of its live stream. Pure.

export interface ProgressState {
  readonly batchId: string;
  readonly status: string;
  /** Lines of the batch; undefined until it is validated. */
  readonly total: number | undefined;
  readonly completed: number;
  readonly failed: number;
  /** When the first line ended, ms (for the rate). */
  readonly firstLineAt: number | undefined;
}

export const startProgress = (batchId: string): ProgressState => ({ batchId, status: 'validating', total: undefined, completed: 0, failed: 0, firstLineAt: undefined });

/** What the status becomes after each lifecycle event (the terminal ones end the stream). */
const STATUS_AFTER: Record<string, string> = {
  BatchValidated: 'in_progress',
  BatchFinalizing: 'finalizing',
  BatchCancelRequested: 'cancelling',
  BatchExpiryStarted: 'expiring',
  BatchCompleted: 'completed',
  BatchFailed: 'failed',
  BatchExpired: 'expired',
  BatchCancelled: 'cancelled',
};

export const TERMINAL = new Set(['completed', 'failed', 'expired', 'cancelled']);

/** The state after one event of the batch's stream (its `type` and `data`). */
export function advance(state: ProgressState, event: { type: string; data?: Record<string, unknown> }, now: number): ProgressState {
  if (event.type === 'LineCompleted' || event.type === 'LineFailed') {
    return {
      ...state,
      completed: state.completed + (event.type === 'LineCompleted' ? 1 : 0),
      failed: state.failed + (event.type === 'LineFailed' ? 1 : 0),
      firstLineAt: state.firstLineAt ?? now,
    };
  }
  const status = STATUS_AFTER[event.type];
  const total = event.type === 'BatchValidated' && typeof event.data?.total === 'number' ? event.data.total : state.total;
  return { ...state, ...(status ? { status } : {}), total };
}

/** Lines ended per second since the first ended; undefined before two have. */
export function rate(state: ProgressState, now: number): number | undefined {
  const done = state.completed + state.failed;
  if (state.firstLineAt === undefined || done < 2 || now <= state.firstLineAt) return undefined;
  return ((done - 1) * 1000) / (now - state.firstLineAt);
}

const count = (value: number) => value.toLocaleString('en');

function duration(seconds: number): string {
  if (seconds < 60) return `${Math.ceil(seconds)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(Math.ceil(seconds % 60)).padStart(2, '0')}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor((seconds % 3600) / 60)).padStart(2, '0')}m`;
}

/** One line: `batch_… in_progress 1,234/5,000 lines, 3 failed, 412 lines/s, about 9s left`. */
export function progressLine(state: ProgressState, now: number): string {
  const done = state.completed + state.failed;
  const parts: string[] = [];
  parts.push(state.total === undefined ? `${count(done)} lines` : `${count(done)}/${count(state.total)} lines`);
  if (state.failed > 0) parts.push(`${count(state.failed)} failed`);
  const perSecond = rate(state, now);
  if (perSecond !== undefined) {
    parts.push(`${perSecond >= 10 ? Math.round(perSecond).toLocaleString('en') : perSecond.toFixed(1)} lines/s`);
    if (state.total !== undefined && !TERMINAL.has(state.status) && done < state.total) parts.push(`about ${duration((state.total - done) / perSecond)} left`);
  }
  return `${state.batchId} ${state.status} ${parts.join(', ')}`;
}
