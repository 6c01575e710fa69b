import type { Logger } from 'pino';
import type { Position } from '../event-store/event-store.js';
import type { Projector } from '../../projections/projector.js';

/** Waits until the read models hold what was just appended, so the caller's next read sees it. */
export async function settle(projector: Projector, position: Position | undefined, log: Pick<Logger, 'warn'>): Promise<void> {
  if (!position) return;
  try {
    await projector.waitFor(position);
  } catch (error) {
    // The event is durable; a slow read model only delays when it shows.
    log.warn({ err: error }, 'read models lag behind a write');
  }
}
