import { bucketNameProblem } from '../../platform/s3-bucket-names.js';

/**
 * Which buckets an `s3://` image part may be read from. Image parts come from callers who give
 * no credential, yet are read with the service's own: without these rules a batch line could read
 * Spool's own stored files (another client's uploads) or anything else the service may read.
 */
export interface ImageBucketRules {
  /** IMAGE_BUCKETS: only these; undefined: any bucket but Spool's own. */
  readonly allowed?: ReadonlySet<string>;
  /** BLOB_STORE's bucket. The whole bucket is refused, not only its prefix: whatever else lives there is the operator's, not the caller's. */
  readonly ownBucket?: string;
  /** S3_FORCE_PATH_STYLE off with a custom endpoint: buckets are addressed as host names under it. */
  readonly virtualHostedEndpoint?: boolean;
}

/** Why an image may not be read from `bucket`, for the logs; undefined when it may. */
export function imageBucketRefusal(bucket: string, rules: ImageBucketRules): string | undefined {
  const problem = bucketNameProblem(bucket);
  if (problem) return problem;
  if (rules.ownBucket !== undefined && bucket === rules.ownBucket) return "the bucket of Spool's own blob store (BLOB_STORE)";
  if (rules.allowed && !rules.allowed.has(bucket)) return 'not one of IMAGE_BUCKETS';
  // The SDK would address it as <bucket>.<endpoint host>: with a dot in the name that is no host
  // name it can build on an IP-address endpoint, and it prints a stack trace to stderr on the way.
  if (rules.virtualHostedEndpoint && bucket.includes('.')) return 'a dotted bucket name cannot be addressed virtual-hosted style on the configured endpoint (S3_FORCE_PATH_STYLE is off)';
  return undefined;
}
