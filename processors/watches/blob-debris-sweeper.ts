import type { Logger } from 'pino';
import type { BlobReferences } from '../../src/application/blob-references.js';
import type { BlobStore } from '../../src/blob-store/blob-store.js';
import { RepeatingTask } from './repeating-task.js';

export interface DebrisSwept {
  /** Partial writes of puts cut short (local partial files, incomplete S3 multipart uploads). */
  readonly abandonedWrites: number;
  /** Stored content no event names: the process died between storing it and recording its file. */
  readonly orphans: number;
  /** Content of deleted or expired files whose removal after the event was cut short. */
  readonly leftovers: number;
}

/**
 * Removes what a process killed mid-upload leaves in the blob store, at start and then every
 * interval. Only what has not been written to for the grace age is touched: an upload in progress
 * keeps writing (its partial file, its next multipart part), and content is recorded in the event
 * log right after it is stored, so only an upload stalled for the whole grace age is cut off.
 * Content of a live file is never removed; content of a deleted or expired file whose removal was
 * cut short is, as the event already decided. Several sweepers may run at once: each removes only
 * what no event names, and removing twice is harmless.
 */
export class BlobDebrisSweeper {
  private readonly task: RepeatingTask;

  constructor(
    private readonly deps: {
      blobStore: BlobStore;
      references: BlobReferences;
      log: Pick<Logger, 'info' | 'warn' | 'error'>;
      now?: () => number;
    },
    private readonly settings: { intervalMs: number; graceMs: number },
  ) {
    this.task = new RepeatingTask(() => this.sweepOnce(), settings.intervalMs, (error) => this.deps.log.error({ err: error }, 'blob debris sweep failed'));
  }

  start(): void {
    this.task.start();
  }

  async sweepOnce(): Promise<DebrisSwept> {
    const before = new Date((this.deps.now ?? Date.now)() - this.settings.graceMs);
    let abandonedWrites = 0;
    try {
      abandonedWrites = await this.deps.blobStore.removeAbandonedWrites(before);
    } catch (error) {
      // E.g. an S3-compatible server without ListMultipartUploads: orphans are still swept.
      this.deps.log.warn({ err: error }, 'could not look for abandoned partial writes; on S3, a lifecycle rule with AbortIncompleteMultipartUpload removes them');
    }
    let orphans = 0;
    let leftovers = 0;
    // What the log says of a blob first, its age only then: almost every blob is content that
    // stays, and on local disk each age is a stat. With the ages of every blob (and a lookup
    // prepared at every call) a sweep of 100,000 blobs cost 10.8–12.3 s of CPU every interval,
    // 3.0–3.6 s so (bench/FINDINGS.md, 2026-12-01).
    for await (const key of this.deps.blobStore.list('')) {
      const standing = await this.deps.references.standingOf(key);
      if (standing !== 'unrecorded' && standing !== 'removed') continue;
      const modifiedAt = (await this.deps.blobStore.head(key))?.modifiedAt;
      if (modifiedAt === undefined || modifiedAt >= before) continue;
      await this.deps.blobStore.delete(key);
      if (standing === 'unrecorded') orphans += 1;
      else leftovers += 1;
      this.deps.log.info({ key, standing, modified_at: modifiedAt.toISOString() }, 'blob debris removed');
    }
    if (abandonedWrites > 0) this.deps.log.info({ abandoned_writes: abandonedWrites }, 'abandoned partial writes removed');
    return { abandonedWrites, orphans, leftovers };
  }

  stop(): Promise<void> {
    return this.task.stop();
  }
}
