import type { BlobStore } from '../blob-store/blob-store.js';
import type { AppendResult, EventStore, ExpectedRevision, NewEvent } from '../event-store/event-store.js';
import type { StorageSpace } from '../platform/storage-space.js';

/** An event store whose appends tell the process's StorageSpace whether they found room. */
export class SpaceWatchedEventStore implements EventStore {
  constructor(private readonly inner: EventStore, private readonly storage: StorageSpace) {}

  get kind(): EventStore['kind'] {
    return this.inner.kind;
  }

  async appendToStream(streamName: string, events: readonly NewEvent[], options?: { expectedRevision?: ExpectedRevision }): Promise<AppendResult> {
    try {
      const result = await this.inner.appendToStream(streamName, events, options);
      this.storage.wrote();
      return result;
    } catch (error) {
      this.storage.refused(error, 'event store');
      throw error;
    }
  }

  readStream: EventStore['readStream'] = (streamName, options) => this.inner.readStream(streamName, options);
  readAll: EventStore['readAll'] = (options) => this.inner.readAll(options);
  headPosition: EventStore['headPosition'] = () => this.inner.headPosition();
  subscribeToAll: EventStore['subscribeToAll'] = (options, handler) => this.inner.subscribeToAll(options, handler);
  close: EventStore['close'] = () => this.inner.close();
}

/** A blob store whose puts tell the process's StorageSpace whether they found room. */
export class SpaceWatchedBlobStore implements BlobStore {
  readonly description: string;
  readonly kind: BlobStore['kind'];

  constructor(private readonly inner: BlobStore, private readonly storage: StorageSpace) {
    this.description = inner.description;
    this.kind = inner.kind;
  }

  async put(key: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    try {
      await this.inner.put(key, body);
      this.storage.wrote();
    } catch (error) {
      this.storage.refused(error, 'blob store');
      throw error;
    }
  }

  get: BlobStore['get'] = (key, range) => this.inner.get(key, range);
  head: BlobStore['head'] = (key) => this.inner.head(key);
  delete: BlobStore['delete'] = (key) => this.inner.delete(key);
  list: BlobStore['list'] = (prefix) => this.inner.list(prefix);
  entries: BlobStore['entries'] = (prefix) => this.inner.entries(prefix);
  removeAbandonedWrites: BlobStore['removeAbandonedWrites'] = (before) => this.inner.removeAbandonedWrites(before);
}
