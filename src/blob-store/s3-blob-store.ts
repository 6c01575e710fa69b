import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { type BlobEntry, type BlobHead, type BlobStore, BlobNotFoundError, assertBlobKey } from './blob-store.js';
import type { S3Location } from '../platform/s3-location.js';
import { isNotFound } from '../platform/s3-client.js';

const MIB = 1024 * 1024;

/**
 * Blobs as S3 objects. A put streams the body as a multipart upload, holding at most
 * (concurrency + 1) parts in memory whatever the object's size; a body smaller than one part goes
 * up as a single PutObject. A failed put aborts the multipart upload, so nothing is left behind.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = 's3';
  readonly description: string;

  constructor(
    private readonly client: S3Client,
    private readonly location: S3Location,
    private readonly partSize = 8 * MIB,
    private readonly concurrency = 2,
  ) {
    if (partSize < 5 * MIB) throw new Error('S3 multipart parts must be at least 5 MiB');
    this.description = `s3://${location.bucket}/${location.prefix}`;
  }

  private objectKey(key: string): string {
    assertBlobKey(key);
    return this.location.prefix ? `${this.location.prefix}/${key}` : key;
  }

  async put(key: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    const Bucket = this.location.bucket;
    const Key = this.objectKey(key);
    let uploadId: string | undefined;
    const completed: { PartNumber: number; ETag: string }[] = [];
    const inFlight = new Set<Promise<void>>();
    // The part being filled: chunks are copied in, since a producer may reuse a chunk's memory once
    // the next is asked for. It grows by doubling up to a part's size, so a small object costs its size.
    let part = Buffer.alloc(0);
    let filled = 0;
    let partNumber = 0;

    const sendPart = async (bytes: Buffer) => {
      if (uploadId === undefined) {
        const created = await this.client.send(new CreateMultipartUploadCommand({ Bucket, Key }));
        if (!created.UploadId) throw new Error(`S3 returned no upload id for ${Key}`);
        uploadId = created.UploadId;
      }
      const PartNumber = ++partNumber;
      const upload = this.client
        .send(new UploadPartCommand({ Bucket, Key, UploadId: uploadId, PartNumber, Body: bytes, ContentLength: bytes.length }))
        .then((answer) => {
          completed.push({ PartNumber, ETag: answer.ETag ?? '' });
        })
        .finally(() => inFlight.delete(upload));
      upload.catch(() => undefined); // observed below, by race or all
      inFlight.add(upload);
      if (inFlight.size >= this.concurrency) await Promise.race(inFlight);
    };
    const takePart = () => {
      const bytes = part.subarray(0, filled);
      part = Buffer.alloc(0);
      filled = 0;
      return bytes;
    };

    try {
      for await (const chunk of body) {
        for (let at = 0; at < chunk.length; ) {
          const room = this.partSize - filled;
          if (part.length - filled < Math.min(room, chunk.length - at)) {
            const grown = Buffer.allocUnsafe(Math.min(this.partSize, Math.max(2 * part.length, filled + chunk.length - at, 64 * 1024)));
            part.copy(grown, 0, 0, filled);
            part = grown;
          }
          const taken = Math.min(room, chunk.length - at);
          part.set(chunk.subarray(at, at + taken), filled);
          filled += taken;
          at += taken;
          if (filled === this.partSize) await sendPart(takePart());
        }
      }
      if (uploadId === undefined) {
        const whole = takePart();
        await this.client.send(new PutObjectCommand({ Bucket, Key, Body: whole, ContentLength: whole.length }));
        return;
      }
      if (filled > 0) await sendPart(takePart());
      await Promise.all(inFlight);
      completed.sort((a, b) => a.PartNumber - b.PartNumber);
      await this.client.send(
        new CompleteMultipartUploadCommand({ Bucket, Key, UploadId: uploadId, MultipartUpload: { Parts: completed } }),
      );
    } catch (error) {
      // Leaving the loop early closed the body (a stream is destroyed by its iterator's return).
      await Promise.allSettled(inFlight);
      if (uploadId !== undefined) {
        await this.client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId: uploadId })).catch(() => undefined);
      }
      throw error;
    }
  }

  async get(key: string, range?: { start: number; end: number }): Promise<Readable> {
    try {
      const answer = await this.client.send(
        new GetObjectCommand({
          Bucket: this.location.bucket,
          Key: this.objectKey(key),
          ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
        }),
      );
      return answer.Body as Readable;
    } catch (error) {
      if (isNotFound(error)) throw new BlobNotFoundError(key);
      throw error;
    }
  }

  async head(key: string): Promise<BlobHead | undefined> {
    try {
      const answer = await this.client.send(new HeadObjectCommand({ Bucket: this.location.bucket, Key: this.objectKey(key) }));
      return { size: answer.ContentLength ?? 0, modifiedAt: answer.LastModified ?? new Date(0) };
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.location.bucket, Key: this.objectKey(key) }));
  }

  async *list(prefix: string): AsyncIterable<string> {
    for await (const entry of this.entries(prefix)) yield entry.key;
  }

  async *entries(prefix: string): AsyncIterable<BlobEntry> {
    const root = this.root();
    let ContinuationToken: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.location.bucket, Prefix: root + prefix, ContinuationToken }),
      );
      for (const object of page.Contents ?? []) if (object.Key) yield { key: object.Key.slice(root.length), modifiedAt: object.LastModified ?? new Date(0) };
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
  }

  /**
   * Aborts multipart uploads under the prefix begun before `before` whose last part, if any, is
   * older too: a put in progress sends a part every partSize bytes. Servers without
   * ListMultipartUploads make this throw; a bucket lifecycle rule (AbortIncompleteMultipartUpload)
   * does the same job there.
   */
  async removeAbandonedWrites(before: Date): Promise<number> {
    const Bucket = this.location.bucket;
    let removed = 0;
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    do {
      const page = await this.client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: this.root(), KeyMarker, UploadIdMarker }));
      for (const upload of page.Uploads ?? []) {
        if (!upload.Key || !upload.UploadId || !upload.Initiated || upload.Initiated >= before) continue;
        if ((await this.lastPartAt(upload.Key, upload.UploadId)) >= before) continue;
        await this.client.send(new AbortMultipartUploadCommand({ Bucket, Key: upload.Key, UploadId: upload.UploadId }));
        removed += 1;
      }
      [KeyMarker, UploadIdMarker] = page.IsTruncated ? [page.NextKeyMarker, page.NextUploadIdMarker] : [undefined, undefined];
    } while (KeyMarker !== undefined);
    return removed;
  }

  private async lastPartAt(Key: string, UploadId: string): Promise<Date> {
    let latest = new Date(0);
    let PartNumberMarker: string | undefined;
    do {
      const page = await this.client.send(new ListPartsCommand({ Bucket: this.location.bucket, Key, UploadId, PartNumberMarker }));
      for (const part of page.Parts ?? []) if (part.LastModified && part.LastModified > latest) latest = part.LastModified;
      PartNumberMarker = page.IsTruncated ? page.NextPartNumberMarker : undefined;
    } while (PartNumberMarker !== undefined);
    return latest;
  }

  private root(): string {
    return this.location.prefix ? `${this.location.prefix}/` : '';
  }
}
