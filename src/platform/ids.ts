import { randomBytes } from 'node:crypto';

/** `file-` and 24 hex digits: unguessable, and safe as a blob key segment. */
export function newFileId(): string {
  return `file-${randomBytes(12).toString('hex')}`;
}

/** `batch_` and 24 hex digits. */
export function newBatchId(): string {
  return `batch_${randomBytes(12).toString('hex')}`;
}
