import { describe, expect, it } from 'vitest';
import { type ParsedBlobKey, chunkPartBlobKey, chunkPartsPrefix, fileBlobKey, parseBlobKey, workFileBlobKey } from '../../src/domain/blob-keys.js';
import { type BatchEvent, type BatchFacts, batchDecider } from '../../src/domain/batch.js';
import { type FileFacts, fileDecider } from '../../src/domain/file.js';
import { deciderSpec } from '../support/decider-spec.js';

describe('blob keys', () => {
  const made: ReadonlyArray<readonly [string, string, ParsedBlobKey]> = [
    ['a file', fileBlobKey('file-abc'), { kind: 'file', fileId: 'file-abc' }],
    ["an account's file", fileBlobKey('file-abc', 'acme'), { kind: 'file', fileId: 'file-abc' }],
    ["an account's work file", workFileBlobKey('batch_abc', 'acme'), { kind: 'work', batchId: 'batch_abc' }],
    ["an account's output part", chunkPartBlobKey('batch_abc', 3, 'output', 'acme'), { kind: 'part', batchId: 'batch_abc', chunk: 3, output: 'output' }],
    ['a work file', workFileBlobKey('batch_abc'), { kind: 'work', batchId: 'batch_abc' }],
    ['an output part', chunkPartBlobKey('batch_abc', 0, 'output'), { kind: 'part', batchId: 'batch_abc', chunk: 0, output: 'output' }],
    ['an error part', chunkPartBlobKey('batch_abc', 12, 'error'), { kind: 'part', batchId: 'batch_abc', chunk: 12, output: 'error' }],
  ];

  it.each(made)('of %s parse back to what made them', (_what, key, parsed) => {
    expect(parseBlobKey(key)).toEqual(parsed);
  });

  it('keep the shapes already in the blob store', () => {
    expect(fileBlobKey('file-abc')).toBe('files/file-abc');
    expect(fileBlobKey('file-abc', 'acme')).toBe('accounts/acme/files/file-abc');
    expect(workFileBlobKey('batch_abc', 'acme')).toBe('accounts/acme/batches/batch_abc/work.jsonl');
    expect(chunkPartsPrefix('batch_abc', 'acme')).toBe('accounts/acme/batches/batch_abc/parts/');
    expect(workFileBlobKey('batch_abc')).toBe('batches/batch_abc/work.jsonl');
    expect(chunkPartBlobKey('batch_abc', 3, 'error')).toBe('batches/batch_abc/parts/3.error.jsonl');
    expect(chunkPartBlobKey('batch_abc', 3, 'output').startsWith(chunkPartsPrefix('batch_abc'))).toBe(true);
  });

  it('name nothing for keys of other shapes', () => {
    for (const key of [
      '',
      'files/',
      'files/a/b',
      'other/file-abc',
      'batches/batch_abc',
      'batches//work.jsonl',
      'batches/batch_abc/work.jsonl/x',
      'batches/batch_abc/input.jsonl',
      'batches/batch_abc/parts/',
      'batches/batch_abc/parts/x.output.jsonl',
      'batches/batch_abc/parts/1.debug.jsonl',
      'batches/batch_abc/parts/1/output.jsonl',
      'Files/file-abc',
      'accounts/acme',
      'accounts/acme/files/',
      'accounts/acme/file-abc',
      'accounts/acme/files/file-abc/x',
      'accounts//files/file-abc',
      'accounts/acme/accounts/other/files/file-abc',
      'accounts/acme/other/file-abc',
    ]) {
      expect(parseBlobKey(key), key).toBeUndefined();
    }
  });
});

describe('blob keys the deciders record', () => {
  it("given no file, when its content is registered, then FileUploaded names the file's own key", () => {
    const facts: FileFacts = { fileId: 'file-1', filename: 'a.jsonl', purpose: 'batch', bytes: 1, sha256: 'a'.repeat(64), blobKey: fileBlobKey('file-1'), createdAt: 1, expiresAt: null };
    deciderSpec(fileDecider).given([]).when({ type: 'RegisterFile', file: facts }).then([
      { type: 'FileUploaded', data: { file_id: 'file-1', filename: 'a.jsonl', purpose: 'batch', bytes: 1, sha256: 'a'.repeat(64), blob_key: 'files/file-1', created_at: 1, expires_at: null } },
    ]);
  });

  it('given a created batch, when its lines are laid out in a work file, then BatchValidated names the input and the work file by their keys', () => {
    const facts: BatchFacts = {
      batch_id: 'batch_1', input_file_id: 'file-1', endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job', model: 'm',
      price_1m_tokens: 1, metadata: null, output_expires_after: null, created_at: 100, expires_at: 200,
    };
    const validation = { total: 1, input_blob_key: fileBlobKey('file-1'), work_blob_key: workFileBlobKey('batch_1'), chunks: [{ index: 0, first_line: 1, lines: 1, start: 0, end: 10 }] };
    deciderSpec(batchDecider)
      .given([{ type: 'BatchCreated', data: facts }])
      .when({ type: 'RecordValidation', at: 110, outcome: { ok: true, validation } })
      .then([{ type: 'BatchValidated', data: { batch_id: 'batch_1', ...validation, in_progress_at: 110 } } as BatchEvent]);
    expect([parseBlobKey(validation.input_blob_key), parseBlobKey(validation.work_blob_key)]).toEqual([{ kind: 'file', fileId: 'file-1' }, { kind: 'work', batchId: 'batch_1' }]);
  });
});
