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
