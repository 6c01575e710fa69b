import type { Readable } from 'node:stream';
import * as E from 'fp-ts/lib/Either.js';
import type { Logger } from 'pino';
import type { BlobStore } from '../blob-store/blob-store.js';
import { ByteMeter } from '../blob-store/byte-meter.js';
import type { Clock } from '../platform/clock.js';
import { type FileCommand, type FileFacts, fileDecider } from '../domain/file.js';
import { fileStreamName } from '../domain/stream-names.js';
import { fileBlobKey } from '../domain/blob-keys.js';
import type { Rejection } from '../domain/rejection.js';
import type { EventStore } from '../event-store/event-store.js';
import { type CommandMetadata, type ReadModelsPosition, execute } from './command-handler.js';

/**
 * Files as the application sees them: content in the blob store, facts in the event log. Content
 * is stored in full before the FileUploaded event is appended, and removed again if the append
 * does not happen, so the log never names content that is not there.
 */
export class FileRegistry {
  constructor(
    private readonly deps: {
      eventStore: EventStore;
      blobStore: BlobStore;
      projector: ReadModelsPosition;
      clock: Clock;
      log: Pick<Logger, 'warn'>;
    },
  ) {}

  /**
   * Streams content into the blob store, counting and hashing it; cut off past the limit. The
   * body may be a stream or any async iterable, of bytes or text; a chunk of bytes may be reused
   * once the next is asked for (see BlobStore.put).
   */
  async storeContent(
    fileId: string,
    body: AsyncIterable<Uint8Array | string>,
    limit: { bytes: number; name: string },
    /** The account that will own it: its content goes under the account's prefix. */
    accountId?: string,
  ): Promise<{ blobKey: string; bytes: number; sha256: string }> {
    const blobKey = fileBlobKey(fileId, accountId);
    const meter = new ByteMeter(limit);
    await this.deps.blobStore.put(blobKey, meter.measure(body));
    return { blobKey, bytes: meter.bytes, sha256: meter.digest() };
  }

  async discardContent(blobKey: string): Promise<void> {
    await this.deps.blobStore.delete(blobKey);
  }

  /** Records an uploaded file; the read models hold it when this returns. */
  async register(file: FileFacts, metadata: CommandMetadata): Promise<E.Either<Rejection, FileFacts>> {
    let outcome;
    try {
      // A new file's id was minted for it (an upload), or is its batch's output's, registered once.
      outcome = await execute(this.deps, fileStreamName(file.fileId), fileDecider, { type: 'RegisterFile', file }, { metadata, newStream: true });
    } catch (error) {
      await this.discardContent(file.blobKey);
      throw error;
    }
    if (E.isLeft(outcome)) {
      // A conflict means a file with this id exists, and the content under its key is its own.
      if (outcome.left.kind !== 'conflict') await this.discardContent(file.blobKey);
      return outcome;
    }
    return E.right(file);
  }

  async delete(fileId: string, metadata: CommandMetadata): Promise<E.Either<Rejection, FileFacts>> {
    return this.remove({ type: 'DeleteFile', fileId, at: this.deps.clock.nowSeconds() }, metadata);
  }

  async expire(fileId: string, metadata: CommandMetadata): Promise<E.Either<Rejection, FileFacts>> {
    return this.remove({ type: 'ExpireFile', fileId, at: this.deps.clock.nowSeconds() }, metadata);
  }

  private async remove(command: FileCommand & { fileId: string }, metadata: CommandMetadata): Promise<E.Either<Rejection, FileFacts>> {
    const outcome = await execute(this.deps, fileStreamName(command.fileId), fileDecider, command, { metadata });
    if (E.isLeft(outcome)) return outcome;
    const state = outcome.right.state;
    if (state.status === 'absent') throw new Error(`file ${command.fileId} vanished while being removed`);
    // The event is the fact; content removal follows it and is safe to repeat.
    await this.discardContent(state.file.blobKey);
    return E.right(state.file);
  }

  async openContent(blobKey: string): Promise<Readable> {
    return this.deps.blobStore.get(blobKey);
  }
}
