// S3's rules for bucket names: configuration checks IMAGE_BUCKETS with them, and the image
// resolver every bucket a caller names.

const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const IPV4_LIKE = /^\d+\.\d+\.\d+\.\d+$/;

/**
 * Why `bucket` is not a general-purpose S3 bucket name, or undefined when it is. ARNs and
 * access-point aliases (names ending -s3alias or --ol-s3, reserved by S3) are refused: they
 * could name Spool's own bucket under another name.
 */
export function bucketNameProblem(bucket: string): string | undefined {
  if (!BUCKET_NAME.test(bucket)) return 'not a bucket name (3 to 63 lower-case letters, digits, dots and hyphens)';
  if (bucket.includes('..') || bucket.includes('.-') || bucket.includes('-.')) return 'not a bucket name (adjacent dots or hyphens)';
  if (IPV4_LIKE.test(bucket)) return 'not a bucket name (formatted as an IP address)';
  if (bucket.startsWith('xn--') || bucket.startsWith('sthree-')) return 'not a bucket name (reserved prefix)';
  if (bucket.endsWith('-s3alias') || bucket.endsWith('--ol-s3')) return 'an access point alias, not a bucket';
  return undefined;
}
