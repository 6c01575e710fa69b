import type { FilesQueries } from '../../projections/files-projection.js';
import { FINAL_STATUSES, batchDecider } from '../domain/batch.js';
import { batchStreamName, fileStreamName } from '../domain/stream-names.js';
import { parseBlobKey } from '../domain/blob-keys.js';
import { loadState } from './command-handler.js';
import type { EventStore } from '../event-store/event-store.js';

/**
 * What the event log says of a blob:
 * - `content`: a file's content, named by an event; it stays.
 * - `removed`: the content of a file since deleted or expired; the event says it is to go, and its
 *   removal (which follows the event) was cut short.
 * - `unrecorded`: no event names it; the process died between storing it and recording its file.
 * - `foreign`: a key of a shape Spool never writes; not Spool's to remove.
 */
export type BlobStanding = 'content' | 'removed' | 'unrecorded' | 'foreign';

/**
 * Spool writes three kinds of blob (their keys: src/domain/blob-keys.ts). A file's content, under
 * files/<file_id> (FileRegistry.storeContent): the events that name those are FileUploaded.blob_key,
 * BatchValidated.input_blob_key (the input file's), and batch output and error files, which are
 * files, so such a blob's standing is its file's. A batch's work file, under
 * batches/<batch_id>/work.jsonl, named by BatchValidated.work_blob_key: it stands while its batch
 * runs and is to go once the batch is over. And its chunks' rendered output lines, under
 * batches/<batch_id>/parts/ (ChunkOutputParts), which stand as long as the batch is not over.
 * Staged checkpoints live on local disk, not here. An account's blobs are the same three under
 * accounts/<account_id>/.
 */
export class BlobReferences {
  constructor(private readonly deps: { eventStore: EventStore; filesQueries: FilesQueries }) {}

  async standingOf(key: string): Promise<BlobStanding> {
    const parsed = parseBlobKey(key);
    if (parsed === undefined) return 'foreign';
    if (parsed.kind === 'work') return this.workFileStanding(parsed.batchId, key);
    if (parsed.kind === 'part') return this.chunkPartStanding(parsed.batchId);
    return this.fileContentStanding(parsed.fileId);
  }

  /** The files read model decides, or the file's stream where the read model does not know it. */
  private async fileContentStanding(fileId: string): Promise<BlobStanding> {
    const status = this.deps.filesQueries.statusOf(fileId);
    if (status !== undefined) return status === 'active' ? 'content' : 'removed';
    // The read models may lag behind the log (being rebuilt, or another process's upload just
    // recorded): the file's stream decides.
    let last: string | undefined;
    for await (const event of this.deps.eventStore.readStream(fileStreamName(fileId))) last = event.type;
    if (last === undefined) return 'unrecorded';
    return last === 'FileDeleted' || last === 'FileExpired' ? 'removed' : 'content';
  }

  /** The batch's stream decides: a work file no validation recorded was left by a crash. */
  private async workFileStanding(batchId: string, key: string): Promise<BlobStanding> {
    const { state } = await loadState(this.deps.eventStore, batchStreamName(batchId), batchDecider);
    if (state.status === 'absent' || state.validation?.work_blob_key !== key) return 'unrecorded';
    return FINAL_STATUSES.includes(state.status) ? 'removed' : 'content';
  }

  /** A chunk's rendered lines stand while its batch is not over. */
  private async chunkPartStanding(batchId: string): Promise<BlobStanding> {
    const { state } = await loadState(this.deps.eventStore, batchStreamName(batchId), batchDecider);
    if (state.status === 'absent') return 'unrecorded';
    return FINAL_STATUSES.includes(state.status) ? 'removed' : 'content';
  }
}
