// The File aggregate: pure decide/evolve, no I/O.
import * as E from 'fp-ts/lib/Either.js';
import type { Decider } from './decider.js';
import type { Rejection } from './rejection.js';
import { reject } from './rejection.js';

/** Purposes a client may upload with (spec §4.1). */
export const UPLOAD_PURPOSES = ['assistants', 'batch', 'fine-tune', 'vision', 'user_data', 'evals'] as const;
/**
 * Purposes a File may carry (spec §2.2), plus `evals`: the upload table admits it, so a file
 * uploaded with it must be able to say so.
 */
export const FILE_PURPOSES = [
  'assistants',
  'assistants_output',
  'batch',
  'batch_output',
  'fine-tune',
  'fine-tune-results',
  'vision',
  'user_data',
  'evals',
] as const;
export type FilePurpose = (typeof FILE_PURPOSES)[number];

export const DAY_SECONDS = 24 * 60 * 60;
/** Spec §2.2: batch files expire after 30 days unless the upload says otherwise. */
export const BATCH_FILE_DEFAULT_TTL_SECONDS = 30 * DAY_SECONDS;

export interface ExpiresAfter {
  readonly anchor: 'created_at';
  readonly seconds: number;
}

/** When a file expires: null means never (it persists until deleted). */
export function fileExpiresAt(purpose: FilePurpose, createdAt: number, expiresAfter?: ExpiresAfter): number | null {
  if (expiresAfter) return createdAt + expiresAfter.seconds;
  return purpose === 'batch' ? createdAt + BATCH_FILE_DEFAULT_TTL_SECONDS : null;
}

export const MAX_FILENAME_LENGTH = 255;

/**
 * A client's filename is a label, never a path: keep its last path segment, drop control
 * characters, and never let it be empty, "." or "..".
 */
export function sanitizeFilename(raw: string | undefined): string {
  const lastSegment = (raw ?? '').split(/[/\\]/).pop() ?? '';
  // eslint-disable-next-line no-control-regex
  const printable = lastSegment.replace(/[\u0000-\u001f\u007f]/g, '').trim();
  const name = Array.from(printable).slice(0, MAX_FILENAME_LENGTH).join('');
  return name === '' || name === '.' || name === '..' ? 'file' : name;
}

export interface FileFacts {
  readonly fileId: string;
  readonly filename: string;
  readonly purpose: FilePurpose;
  readonly bytes: number;
  readonly sha256: string;
  readonly blobKey: string;
  readonly createdAt: number;
  readonly expiresAt: number | null;
  /** The account that owns it (ACCOUNTS=required); absent when accounts are off. */
  readonly accountId?: string;
}

export type FileState =
  | { readonly status: 'absent' }
  | { readonly status: 'active' | 'deleted' | 'expired'; readonly file: FileFacts };

export const initialFileState: FileState = { status: 'absent' };

export type FileCommand =
  | { readonly type: 'RegisterFile'; readonly file: FileFacts }
  | { readonly type: 'DeleteFile'; readonly fileId: string; readonly at: number }
  | { readonly type: 'ExpireFile'; readonly fileId: string; readonly at: number };

export type FileEvent =
  | {
      readonly type: 'FileUploaded';
      readonly data: {
        readonly file_id: string;
        readonly filename: string;
        readonly purpose: FilePurpose;
        readonly bytes: number;
        readonly sha256: string;
        readonly blob_key: string;
        readonly created_at: number;
        readonly expires_at: number | null;
        readonly account_id?: string;
      };
    }
  | { readonly type: 'FileDeleted'; readonly data: { readonly file_id: string; readonly deleted_at: number } }
  | { readonly type: 'FileExpired'; readonly data: { readonly file_id: string; readonly expired_at: number } };

export function decideFile(command: FileCommand, state: FileState): E.Either<Rejection, FileEvent[]> {
  switch (command.type) {
    case 'RegisterFile': {
      if (state.status !== 'absent') return reject('conflict', `File ${command.file.fileId} already exists`, 'file_id');
      const file = command.file;
      return E.right([
        {
          type: 'FileUploaded',
          data: {
            file_id: file.fileId,
            filename: file.filename,
            purpose: file.purpose,
            bytes: file.bytes,
            sha256: file.sha256,
            blob_key: file.blobKey,
            created_at: file.createdAt,
            expires_at: file.expiresAt,
            ...(file.accountId !== undefined ? { account_id: file.accountId } : {}),
          },
        },
      ]);
    }
    case 'DeleteFile':
      if (state.status !== 'active') return reject('not_found', `No such File object: ${command.fileId}`, 'file_id');
      return E.right([{ type: 'FileDeleted', data: { file_id: command.fileId, deleted_at: command.at } }]);
    case 'ExpireFile':
      if (state.status !== 'active') return reject('not_found', `No such File object: ${command.fileId}`, 'file_id');
      if (state.file.expiresAt === null || state.file.expiresAt > command.at) {
        return reject('precondition_failed', `File ${command.fileId} has not expired`, 'file_id');
      }
      return E.right([{ type: 'FileExpired', data: { file_id: command.fileId, expired_at: command.at } }]);
  }
}

export function evolveFile(state: FileState, event: FileEvent): FileState {
  switch (event.type) {
    case 'FileUploaded':
      return {
        status: 'active',
        file: {
          fileId: event.data.file_id,
          filename: event.data.filename,
          purpose: event.data.purpose,
          bytes: event.data.bytes,
          sha256: event.data.sha256,
          blobKey: event.data.blob_key,
          createdAt: event.data.created_at,
          expiresAt: event.data.expires_at,
          ...(event.data.account_id !== undefined ? { accountId: event.data.account_id } : {}),
        },
      };
    case 'FileDeleted':
      return state.status === 'absent' ? state : { status: 'deleted', file: state.file };
    case 'FileExpired':
      return state.status === 'absent' ? state : { status: 'expired', file: state.file };
  }
}

export interface UploadLimits {
  /** Any file (a documented choice: the spec names no overall limit). */
  readonly maxFileBytes: number;
  /** Files of purpose batch (spec §8: input file size 200 MB). */
  readonly maxBatchFileBytes: number;
}

const MIB = 1024 * 1024;
export const DEFAULT_UPLOAD_LIMITS: UploadLimits = { maxFileBytes: 512 * MIB, maxBatchFileBytes: 200 * MIB };

export function uploadLimitFor(purpose: string | undefined, limits: UploadLimits): { bytes: number; name: string } {
  return purpose === 'batch'
    ? { bytes: limits.maxBatchFileBytes, name: 'input file size limit for purpose batch' }
    : { bytes: limits.maxFileBytes, name: 'file size limit' };
}

export const fileDecider: Decider<FileCommand, FileState, FileEvent> = { decide: decideFile, evolve: evolveFile, initialState: initialFileState };
