import { isIP } from 'node:net';

export interface S3Location {
  readonly bucket: string;
  /** Key prefix without leading or trailing slash; '' for the bucket's root. */
  readonly prefix: string;
}

/** Parses `s3://bucket` or `s3://bucket/some/prefix[/]`. */
export function parseS3Url(url: string): S3Location {
  const match = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(url);
  if (!match) throw new Error(`not an s3://bucket/prefix location: ${JSON.stringify(url)}`);
  const prefix = (match[2] ?? '').replace(/^\/+|\/+$/g, '');
  return { bucket: match[1]!, prefix };
}

/** How the S3 client addresses buckets: config.s3's AWS_ENDPOINT_URL_S3 and S3_FORCE_PATH_STYLE. */
export interface S3Addressing {
  readonly endpoint?: string | undefined;
  readonly forcePathStyle?: boolean | undefined;
}

/**
 * Why the AWS SDK cannot address `bucket` on the configured endpoint, or undefined when it can.
 * With path style off, the SDK puts a dotted bucket name whose labels could be host labels in
 * front of the endpoint's host (virtual-hosted style, on a plain-HTTP endpoint): on an endpoint
 * given as an IP address that is no host name (`localhost.localdomain.127.0.0.1`), and the SDK
 * prints a stack trace to standard error before it fails. Such a bucket is refused before the SDK
 * sees it. Dotted names are refused there whatever their labels: which ones the SDK would send
 * path style instead is its own rule, not one to lean on.
 */
export function bucketAddressingProblem(bucket: string, addressing: S3Addressing): string | undefined {
  if (addressing.forcePathStyle || !addressing.endpoint || !bucket.includes('.')) return undefined;
  let host: string;
  try {
    host = new URL(addressing.endpoint).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return undefined;
  }
  if (isIP(host) === 0) return undefined;
  return 'a dotted bucket name cannot be addressed virtual-hosted style on an S3 endpoint given as an IP address (S3_FORCE_PATH_STYLE is off)';
}
