import { accountsProjection } from './accounts-projection.js';
import { batchesProjection } from './batches-projection.js';
import { filesProjection } from './files-projection.js';
import { historyProjection } from './history-projection.js';
import { jobsProjection } from './jobs-projection.js';
import type { Projection } from './projection.js';
import { weightsProjection } from './weights-projection.js';
import { webhooksProjection } from './webhooks-projection.js';

/** Every read model of the service, in the order the projector applies them. */
export const ALL_PROJECTIONS: readonly Projection[] = [accountsProjection, filesProjection, jobsProjection, batchesProjection, weightsProjection, webhooksProjection, historyProjection];

/**
 * The read models a process keeps: all of them where it serves the API; without the history index
 * where it does not. The index (a row and two index entries per event, every line outcome among
 * them) serves only the API's audit trail, and each processor on Kafka would otherwise write one
 * for every event of the log beside the API process's own (the relay keeps no read models). A process started later on
 * the same data directory with the API builds the index from the log's start, as any new read
 * model does (Projector).
 */
export function projectionsFor(servesApi: boolean): readonly Projection[] {
  return servesApi ? ALL_PROJECTIONS : ALL_PROJECTIONS.filter((projection) => projection !== historyProjection);
}
