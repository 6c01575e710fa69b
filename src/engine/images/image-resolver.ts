import type { S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import type { Readable } from 'node:stream';
import { ConcurrencyLimit } from '../../platform/concurrency-limit.js';
import { type ImageBucketRules, imageBucketRefusal } from './image-bucket-policy.js';

const MAX_REMEMBERED_BUCKETS = 1000;

const shown = (url: string) => (url.length > 300 ? `${url.slice(0, 300)}…` : url);

/**
 * An image part that could not be fetched: only its request fails. The message is the same
 * whatever the reason (no such object, access denied, too large, bucket refused, not an image),
 * so a caller cannot probe what exists or how the service is set up; `detail` is for the logs.
 */
export class ImageFetchError extends Error {
  override readonly name = 'ImageFetchError';
  constructor(readonly url: string, readonly detail: string) {
    super(`The image ${shown(url)} could not be fetched`);
  }
}

export interface ImageResolverSettings extends ImageBucketRules {
  /** IMAGE_MAX_BYTES: larger images fail their request; no more than this (and one byte) is read to find out. */
  readonly maxBytes: number;
  /** IMAGE_FETCH_CONCURRENCY: image fetches held at once, across every request; each holds up to maxBytes. */
  readonly fetchConcurrency: number;
}

const SIGNATURES: Array<[string, (bytes: Buffer) => boolean]> = [
  ['image/png', (b) => b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))],
  ['image/jpeg', (b) => b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff],
  ['image/gif', (b) => b.length >= 6 && (b.subarray(0, 6).toString('latin1') === 'GIF87a' || b.subarray(0, 6).toString('latin1') === 'GIF89a')],
  ['image/webp', (b) => b.length >= 12 && b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP'],
];

/** The image type its first bytes announce, or undefined when they are not an image's. */
export function sniffImageType(bytes: Buffer): string | undefined {
  return SIGNATURES.find(([, matches]) => matches(bytes))?.[0];
}

/**
 * Fetches `s3://bucket/key` image parts of chat requests and hands them on as data URLs. A bucket
 * may live in another region than the service: its region is looked up once (HeadBucket's
 * x-amz-bucket-region) and a client is kept per region. Buckets are checked against the
 * ImageBucketRules before any request is made for them.
 */
export class ImageResolver {
  private readonly regions = new Map<string, Promise<string>>();
  private readonly clients = new Map<string, S3Client>();
  private readonly fetches: ConcurrencyLimit;
  private readonly maxBytes: number;

  constructor(
    /** The AWS SDK loads only when a request names an s3:// image. */
    private readonly clientFor: (region: string) => Promise<S3Client>,
    private readonly defaultRegion: string,
    private readonly settings: ImageResolverSettings,
    private readonly log?: Pick<Logger, 'warn'>,
  ) {
    this.maxBytes = settings.maxBytes;
    this.fetches = new ConcurrencyLimit(settings.fetchConcurrency);
  }

  /** Image fetches under way now (for tests and status). */
  get inFlight(): number {
    return this.fetches.inFlight;
  }

  /** Whether the body names an s3:// image, which resolve() fetches (most bodies name none, and skip its promise). */
  names(body: Record<string, unknown>): boolean {
    return Array.isArray(body.messages) && namesS3Image(body.messages);
  }

  /**
   * names() of the request's body, answered from its text where it has one and that text holds
   * neither `s3:` nor a \u escape (so no string of it starts with s3://): a batch line's body is
   * then not parsed for this.
   */
  namesIn(request: { readonly body: Record<string, unknown>; readonly bodyText?: string | undefined }): boolean {
    const text = request.bodyText;
    if (text !== undefined && !text.includes('s3:') && !text.includes('\\u')) return false;
    return this.names(request.body);
  }

  /** The request body with every s3:// image part replaced by a data URL. */
  async resolve(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (!this.names(body)) return body;
    const copy = structuredClone(body) as { messages: Array<{ content?: unknown }> };
    const urls = new Map<string, Promise<string>>();
    for (const message of copy.messages) {
      if (!Array.isArray(message?.content)) continue;
      for (const part of message.content as Array<Record<string, unknown> | null>) {
        const url = s3ImageUrl(part);
        if (url === undefined) continue;
        if (!urls.has(url)) urls.set(url, this.fetchLogged(url));
        const dataUrl = await urls.get(url)!;
        const imageUrl = part!.image_url;
        part!.image_url = typeof imageUrl === 'object' && imageUrl !== null ? { ...imageUrl, url: dataUrl } : { url: dataUrl };
      }
    }
    return copy as unknown as Record<string, unknown>;
  }

  private async fetchLogged(url: string): Promise<string> {
    try {
      return await this.fetches.run(() => this.fetchAsDataUrl(url));
    } catch (error) {
      const failure = error instanceof ImageFetchError ? error : new ImageFetchError(url, error instanceof Error ? `${error.name}: ${error.message}` : String(error));
      this.log?.warn({ url: shown(url), reason: failure.detail }, 'an image could not be fetched');
      throw failure;
    }
  }

  private async fetchAsDataUrl(url: string): Promise<string> {
    const match = /^s3:\/\/([^/]+)\/(.+)$/.exec(url);
    if (!match) throw new ImageFetchError(url, 'not an s3://bucket/key location');
    const [, bucket, key] = match as unknown as [string, string, string];
    const refusal = imageBucketRefusal(bucket, this.settings);
    if (refusal) throw new ImageFetchError(url, `bucket refused: ${refusal}`);
    const client = await this.client(bucket);
    const { GetObjectCommand } = await import('@aws-sdk/client-s3');
    let body: Readable;
    try {
      // One byte more than allowed is asked for at most: a larger object is known by it without reading it all.
      const answer = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: `bytes=0-${this.maxBytes}` }));
      body = answer.Body as Readable;
      const total = Number(/\/(\d+)$/.exec(answer.ContentRange ?? '')?.[1] ?? answer.ContentLength);
      if (Number.isFinite(total) && total > this.maxBytes) {
        body.destroy();
        throw new ImageFetchError(url, `it is ${total} bytes, more than IMAGE_MAX_BYTES (${this.maxBytes})`);
      }
    } catch (error) {
      if (error instanceof ImageFetchError) throw error;
      const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      throw new ImageFetchError(url, `${(error as Error).name}${status ? ` (HTTP ${status})` : ''}: ${(error as Error).message}`);
    }
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of body as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > this.maxBytes) {
        body.destroy();
        throw new ImageFetchError(url, `it is more than IMAGE_MAX_BYTES (${this.maxBytes})`);
      }
      chunks.push(chunk);
    }
    const bytes = Buffer.concat(chunks);
    const type = sniffImageType(bytes);
    if (!type) throw new ImageFetchError(url, 'it is not an image (PNG, JPEG, GIF or WebP)');
    return `data:${type};base64,${bytes.toString('base64')}`;
  }
  private async client(bucket: string): Promise<S3Client> {
    let region = this.regions.get(bucket);
    if (!region) {
      // Bucket names come from callers: the cache of their regions must not grow without end.
      if (this.regions.size >= MAX_REMEMBERED_BUCKETS) this.regions.clear();
      region = this.discoverRegion(bucket);
      this.regions.set(bucket, region);
    }
    const name = await region;
    let client = this.clients.get(name);
    if (!client) this.clients.set(name, (client = await this.clientFor(name)));
    return client;
  }

  private async discoverRegion(bucket: string): Promise<string> {
    const { HeadBucketCommand } = await import('@aws-sdk/client-s3');
    try {
      const answer = await (await this.clientFor(this.defaultRegion)).send(new HeadBucketCommand({ Bucket: bucket }));
      return answer.BucketRegion ?? this.defaultRegion;
    } catch (error) {
      // S3 names the bucket's region even when it refuses the request (301, 403).
      const headers = (error as { $response?: { headers?: Record<string, string> } }).$response?.headers;
      return headers?.['x-amz-bucket-region'] ?? this.defaultRegion;
    }
  }
}

/**
 * Whether some message has an image_url part whose URL is s3://. Looked at part by part: every
 * batch line passes here, and writing its messages out as JSON to search them for "s3://" was
 * one of the larger things a line allocated.
 */
function namesS3Image(messages: readonly unknown[]): boolean {
  for (const message of messages) {
    const content = (message as { content?: unknown } | null)?.content;
    if (!Array.isArray(content)) continue;
    for (const part of content as Array<Record<string, unknown> | null>) if (s3ImageUrl(part) !== undefined) return true;
  }
  return false;
}

/** The s3:// URL of a message part that is an image_url part naming one (its url as a string or in an object); undefined otherwise. */
function s3ImageUrl(part: Record<string, unknown> | null | undefined): string | undefined {
  if (part?.type !== 'image_url') return undefined;
  const imageUrl = part.image_url as { url?: unknown } | string | undefined;
  const url = typeof imageUrl === 'string' ? imageUrl : imageUrl?.url;
  return typeof url === 'string' && url.startsWith('s3://') ? url : undefined;
}
