import type { S3Client } from '@aws-sdk/client-s3';
import type { Readable } from 'node:stream';

/** An image part that could not be fetched: only its request fails. */
export class ImageFetchError extends Error {
  override readonly name = 'ImageFetchError';
  constructor(readonly url: string, reason: string) {
    super(`Image ${url} could not be fetched: ${reason}`);
  }
}

/** Images larger than this are refused (a documented choice; OpenAI's own limit is 20 MB). */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;

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
 * x-amz-bucket-region) and a client is kept per region.
 */
export class ImageResolver {
  private readonly regions = new Map<string, Promise<string>>();
  private readonly clients = new Map<string, S3Client>();

  constructor(
    /** The AWS SDK loads only when a request names an s3:// image. */
    private readonly clientFor: (region: string) => Promise<S3Client>,
    private readonly defaultRegion: string,
    private readonly maxBytes = MAX_IMAGE_BYTES,
  ) {}

  /** The request body with every s3:// image part replaced by a data URL. */
  async resolve(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (!Array.isArray(body.messages) || !JSON.stringify(body.messages).includes('s3://')) return body;
    const copy = structuredClone(body) as { messages: Array<{ content?: unknown }> };
    const urls = new Map<string, Promise<string>>();
    for (const message of copy.messages) {
      if (!Array.isArray(message?.content)) continue;
      for (const part of message.content as Array<Record<string, unknown>>) {
        const imageUrl = part?.image_url as { url?: unknown; detail?: unknown } | string | undefined;
        const url = typeof imageUrl === 'string' ? imageUrl : imageUrl?.url;
        if (part?.type !== 'image_url' || typeof url !== 'string' || !url.startsWith('s3://')) continue;
        if (!urls.has(url)) urls.set(url, this.fetchAsDataUrl(url));
        const dataUrl = await urls.get(url)!;
        part.image_url = typeof imageUrl === 'object' && imageUrl !== null ? { ...imageUrl, url: dataUrl } : { url: dataUrl };
      }
    }
    return copy as unknown as Record<string, unknown>;
  }

  private async fetchAsDataUrl(url: string): Promise<string> {
    const match = /^s3:\/\/([^/]+)\/(.+)$/.exec(url);
    if (!match) throw new ImageFetchError(url, 'not an s3://bucket/key location');
    const [, bucket, key] = match as unknown as [string, string, string];
    const client = await this.client(bucket);
    const { GetObjectCommand } = await import('@aws-sdk/client-s3');
    let body: Readable;
    let length: number | undefined;
    try {
      const answer = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      body = answer.Body as Readable;
      length = answer.ContentLength;
    } catch (error) {
      const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      const name = (error as { name?: string }).name;
      if (status === 404 || name === 'NoSuchKey' || name === 'NoSuchBucket') throw new ImageFetchError(url, 'no such object');
      if (status === 403 || name === 'AccessDenied') throw new ImageFetchError(url, 'access denied: the service has no read access to this bucket');
      throw new ImageFetchError(url, (error as Error).message);
    }
    if (length !== undefined && length > this.maxBytes) {
      body.destroy();
      throw new ImageFetchError(url, `it is ${length} bytes, more than the ${this.maxBytes}-byte image size limit`);
    }
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of body as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > this.maxBytes) {
        body.destroy();
        throw new ImageFetchError(url, `it is more than the ${this.maxBytes}-byte image size limit`);
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
