import { S3Client } from '@aws-sdk/client-s3';

// How Spool builds an S3 client and reads its answers. The blob store, checkpoint transfer and
// image parts each take a client built here, so none of them imports another to get one.

export interface S3ClientSettings {
  readonly region?: string;
  readonly endpoint?: string;
  readonly forcePathStyle?: boolean;
}

/**
 * An S3 client that honours the SDK's standard settings (credentials chain, AWS_REGION,
 * AWS_ENDPOINT_URL_S3). Checksums are computed only where S3 requires them: many S3-compatible
 * servers store the aws-chunked framing of the newer default as object content.
 */
export function createS3Client(settings: S3ClientSettings = {}): S3Client {
  return new S3Client({
    region: settings.region ?? 'us-east-1',
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
    forcePathStyle: settings.forcePathStyle ?? false,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** S3's several ways of saying an object (or bucket) is not there. */
export function isNotFound(error: unknown): boolean {
  const candidate = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return candidate.name === 'NoSuchKey' || candidate.name === 'NotFound' || candidate.$metadata?.httpStatusCode === 404;
}
