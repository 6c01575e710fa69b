// Ids derived from names: the same work always yields the same id, whichever process does it.
import { createHash } from 'node:crypto';

/**
 * A UUID derived from a name (RFC 4122 layout, version 5 bits, sha256-based): the same work
 * always yields the same event id, so redelivered work appends nothing twice.
 */
export function deterministicUuid(name: string): string {
  const bytes = createHash('sha256').update(name).digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A stable id derived from a name, with a prefix: `file-…` for a batch's output file, `batch_req_…` for a line. */
export function derivedId(prefix: string, name: string): string {
  return `${prefix}${createHash('sha256').update(name).digest('hex').slice(0, 24)}`;
}
