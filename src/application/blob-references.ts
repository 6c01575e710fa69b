import type { FilesQueries } from '../../projections/files-projection.js';
import { fileStreamName } from '../domain/stream-names.js';
import type { EventStore } from '../event-store/event-store.js';
import { fileIdOfBlobKey } from './file-registry.js';

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
 * Every blob Spool writes is a file's content under files/<file_id> (FileRegistry.storeContent),
 * and every event that names a blob names one of those: FileUploaded.blob_key,
 * BatchValidated.input_blob_key (the input file's), and batch output and error files, which are
 * files. So a blob's standing is its file's. Staged checkpoints live on local disk, not here.
 */
export class BlobReferences {
  constructor(private readonly deps: { eventStore: EventStore; filesQueries: FilesQueries }) {}

  async standingOf(key: string): Promise<BlobStanding> {
    const fileId = fileIdOfBlobKey(key);
    if (fileId === undefined) return 'foreign';
    const status = this.deps.filesQueries.statusOf(fileId);
    if (status !== undefined) return status === 'active' ? 'content' : 'removed';
    // The read models may lag behind the log (being rebuilt, or another process's upload just
    // recorded): the file's stream decides.
    let last: string | undefined;
    for await (const event of this.deps.eventStore.readStream(fileStreamName(fileId))) last = event.type;
    if (last === undefined) return 'unrecorded';
    return last === 'FileDeleted' || last === 'FileExpired' ? 'removed' : 'content';
  }
}
