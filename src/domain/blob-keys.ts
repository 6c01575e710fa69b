// Blob keys: where each kind of content Spool writes is kept in the blob store, and what a key
// says. Makers and parser share one table of shapes, so a key made here always parses back, and a
// key of any other shape is not Spool's.
import type { OutputKind } from './batch-output.js';

const SHAPE = {
  /** A file's content, output and error files included: files/<file_id>. */
  fileFolder: 'files',
  /** An account's files (ACCOUNTS=required): accounts/<account_id>/files/<file_id>. */
  accountFolder: 'accounts',
  /** What a batch writes for itself while it runs: batches/<batch_id>/…. */
  batchFolder: 'batches',
  /** The batch's input lines in the order they are to run: batches/<batch_id>/work.jsonl. */
  workFileName: 'work.jsonl',
  /** Each chunk's rendered lines of one file: batches/<batch_id>/parts/<chunk>.<output|error>.jsonl. */
  partsFolder: 'parts',
} as const;

const PART_NAME = /^(\d+)\.(output|error)\.jsonl$/;

/** Where an account's blobs live (ACCOUNTS=required): accounts/<account_id>/…; account ids hold no `/`. */
const under = (accountId: string | undefined, key: string): string => (accountId === undefined ? key : `${SHAPE.accountFolder}/${accountId}/${key}`);

/** A file's content: under its account's prefix where it has one. */
export const fileBlobKey = (fileId: string, accountId?: string): string => under(accountId, `${SHAPE.fileFolder}/${fileId}`);
export const workFileBlobKey = (batchId: string, accountId?: string): string => under(accountId, `${SHAPE.batchFolder}/${batchId}/${SHAPE.workFileName}`);
/** Where a chunk's rendered lines of one file are kept while its batch runs (the output part even empty; an error part only where a line failed). */
export const chunkPartBlobKey = (batchId: string, chunk: number, kind: OutputKind, accountId?: string): string => `${chunkPartsPrefix(batchId, accountId)}${chunk}.${kind}.jsonl`;
/** The prefix under which all of a batch's chunk parts are kept. */
export const chunkPartsPrefix = (batchId: string, accountId?: string): string => under(accountId, `${SHAPE.batchFolder}/${batchId}/${SHAPE.partsFolder}/`);

/** What a blob key names: a file's content, a batch's work file, or one of its chunk parts. */
export type ParsedBlobKey =
  | { readonly kind: 'file'; readonly fileId: string }
  | { readonly kind: 'work'; readonly batchId: string }
  | { readonly kind: 'part'; readonly batchId: string; readonly chunk: number; readonly output: OutputKind };

/** What a blob key says; undefined for a key none of the makers above produces. */
export function parseBlobKey(key: string): ParsedBlobKey | undefined {
  const [folder, id, ...rest] = key.split('/');
  if (!id) return undefined;
  // An account's blobs are the same shapes under its prefix.
  if (folder === SHAPE.accountFolder) return rest[0] === SHAPE.accountFolder ? undefined : parseBlobKey(rest.join('/'));
  if (folder === SHAPE.fileFolder) return rest.length === 0 ? { kind: 'file', fileId: id } : undefined;
  if (folder !== SHAPE.batchFolder) return undefined;
  if (rest.length === 1 && rest[0] === SHAPE.workFileName) return { kind: 'work', batchId: id };
  const part = rest.length === 2 && rest[0] === SHAPE.partsFolder ? PART_NAME.exec(rest[1]!) : null;
  return part ? { kind: 'part', batchId: id, chunk: Number(part[1]), output: part[2] as OutputKind } : undefined;
}
