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
