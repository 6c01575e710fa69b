import { describe, expect, it } from 'vitest';
import {
  BATCH_FILE_DEFAULT_TTL_SECONDS,
  type FileEvent,
  type FileFacts,
  fileDecider,
  fileExpiresAt,
  sanitizeFilename,
} from '../../src/domain/file.js';
import { deciderSpec } from '../support/decider-spec.js';

const spec = deciderSpec(fileDecider);

const facts: FileFacts = {
  fileId: 'file-1',
  filename: 'input.jsonl',
  purpose: 'batch',
  bytes: 42,
  sha256: 'a'.repeat(64),
  blobKey: 'files/file-1',
  createdAt: 1000,
  expiresAt: 5000,
};
const uploaded: FileEvent = {
  type: 'FileUploaded',
  data: { file_id: 'file-1', filename: 'input.jsonl', purpose: 'batch', bytes: 42, sha256: 'a'.repeat(64), blob_key: 'files/file-1', created_at: 1000, expires_at: 5000 },
};

describe('File aggregate', () => {
  it('registers a new file', () => {
    spec.given([]).when({ type: 'RegisterFile', file: facts }).then([uploaded]);
  });

  it('refuses to register a file id twice', () => {
    spec.given([uploaded]).when({ type: 'RegisterFile', file: facts }).thenRejects({ kind: 'conflict', param: 'file_id' });
  });

  it('deletes an active file', () => {
    spec.given([uploaded]).when({ type: 'DeleteFile', fileId: 'file-1', at: 2000 }).then([{ type: 'FileDeleted', data: { file_id: 'file-1', deleted_at: 2000 } }]);
  });

  it('answers not found for a file never uploaded, deleted, or expired', () => {
    spec.given([]).when({ type: 'DeleteFile', fileId: 'file-1', at: 2000 }).thenRejects({ kind: 'not_found' });
    spec
      .given([uploaded, { type: 'FileDeleted', data: { file_id: 'file-1', deleted_at: 2000 } }])
      .when({ type: 'DeleteFile', fileId: 'file-1', at: 2001 })
      .thenRejects({ kind: 'not_found' });
    spec
      .given([uploaded, { type: 'FileExpired', data: { file_id: 'file-1', expired_at: 5000 } }])
      .when({ type: 'DeleteFile', fileId: 'file-1', at: 6000 })
      .thenRejects({ kind: 'not_found' });
  });

  it('expires a file only once its expires_at has come', () => {
    spec.given([uploaded]).when({ type: 'ExpireFile', fileId: 'file-1', at: 4999 }).thenRejects({ kind: 'precondition_failed' });
    spec.given([uploaded]).when({ type: 'ExpireFile', fileId: 'file-1', at: 5000 }).then([{ type: 'FileExpired', data: { file_id: 'file-1', expired_at: 5000 } }]);
  });

  it('never expires a file without expires_at', () => {
    const persistent: FileEvent = { type: 'FileUploaded', data: { ...uploaded.data, purpose: 'user_data', expires_at: null } } as FileEvent;
    spec.given([persistent]).when({ type: 'ExpireFile', fileId: 'file-1', at: 10 ** 12 }).thenRejects({ kind: 'precondition_failed' });
  });

  it('evolves through upload and deletion', () => {
    spec.given([uploaded]).thenState({ status: 'active', file: facts });
    spec.given([uploaded, { type: 'FileDeleted', data: { file_id: 'file-1', deleted_at: 2000 } }]).thenState({ status: 'deleted', file: facts });
  });
});

describe('file expiry policy', () => {
  it('expires batch files after 30 days and keeps other purposes until deleted', () => {
    expect(fileExpiresAt('batch', 1000)).toBe(1000 + BATCH_FILE_DEFAULT_TTL_SECONDS);
    expect(BATCH_FILE_DEFAULT_TTL_SECONDS).toBe(2_592_000);
    expect(fileExpiresAt('user_data', 1000)).toBeNull();
    expect(fileExpiresAt('vision', 1000, { anchor: 'created_at', seconds: 3600 })).toBe(4600);
    expect(fileExpiresAt('batch', 1000, { anchor: 'created_at', seconds: 7200 })).toBe(8200);
  });
});

describe('sanitizeFilename', () => {
  it('keeps only the last path segment and never yields a path', () => {
    expect(sanitizeFilename('../../etc/passwd')).toBe('passwd');
    expect(sanitizeFilename('C:\\Users\\me\\batch.jsonl')).toBe('batch.jsonl');
    expect(sanitizeFilename('..')).toBe('file');
    expect(sanitizeFilename('dir/')).toBe('file');
    expect(sanitizeFilename(undefined)).toBe('file');
    expect(sanitizeFilename('a\u0000b\nc.jsonl')).toBe('abc.jsonl');
    expect(sanitizeFilename('名前.jsonl')).toBe('名前.jsonl');
    expect(Array.from(sanitizeFilename('x'.repeat(1000))).length).toBe(255);
  });
});
