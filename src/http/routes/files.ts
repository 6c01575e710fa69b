import type { FastifyInstance } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import type { FileRegistry } from '../../application/file-registry.js';
import type { Clock } from '../../platform/clock.js';
import { type FileFacts, type UploadLimits, fileExpiresAt, sanitizeFilename, uploadLimitFor } from '../../domain/file.js';
import { newFileId } from '../../platform/ids.js';
import type { FileListQuery, FileRow } from '../../../projections/files-projection.js';
import type { OwnedObjects } from '../../../projections/owned-objects.js';
import { type Principal, ownerOf } from '../../domain/principal.js';
import type { AccountLimits } from '../../domain/account.js';
import { storageRefusal } from '../../domain/account-quota.js';
import { UnknownCursorError } from '../../../projections/files-projection.js';
import { ApiError, fromRejection, invalidRequest, notFound, tooLarge } from '../api-error.js';
import { httpSchema } from '../../platform/schemas.js';
import { pageBounds } from '../page-bounds.js';
import { requestMetadata } from '../request-metadata.js';
import { UPLOAD_FIELD_SIZE_LIMIT, checkEarlyPurpose, collectUploadField, parseUploadFields } from '../upload-form.js';

export interface FileRouteDeps {
  readonly files: FileRegistry;
  /** Batches, files and histories as the asking principal may see them (never the read models whole). */
  readonly owned: OwnedObjects;
  /** An account's storage limit and what it stores (ACCOUNTS=required). */
  readonly accountsQueries: { limitsOf(accountId: string): AccountLimits | undefined; storedBytesOf(accountId: string): number };
  readonly clock: Clock;
  readonly limits: UploadLimits;
}

export function fileObject(file: Pick<FileRow, 'id' | 'bytes' | 'created_at' | 'expires_at' | 'filename' | 'purpose'>) {
  return {
    id: file.id,
    object: 'file' as const,
    bytes: file.bytes,
    created_at: file.created_at,
    expires_at: file.expires_at,
    filename: file.filename,
    purpose: file.purpose,
    // OpenAI's legacy field, still required by its schema: a listed file is always stored whole.
    status: 'processed' as const,
  };
}

const fileFromFacts = (facts: FileFacts) =>
  fileObject({ id: facts.fileId, bytes: facts.bytes, created_at: facts.createdAt, expires_at: facts.expiresAt, filename: facts.filename, purpose: facts.purpose });

const CONTENT_TYPES: Record<string, string> = {
  jsonl: 'application/jsonl',
  json: 'application/json',
  txt: 'text/plain; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
};

/** The content type a download is served with, from the file name's extension. */
export function contentTypeOf(filename: string): string {
  const extension = /\.([A-Za-z0-9]+)$/.exec(filename)?.[1]?.toLowerCase() ?? '';
  return CONTENT_TYPES[extension] ?? 'application/octet-stream';
}

/** RFC 6266 with an ASCII fallback: the name is a label chosen by a client, never trusted as-is. */
function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

export function registerFileRoutes(app: FastifyInstance, deps: FileRouteDeps): void {
  const fileIdParams = httpSchema('FileIdParams');

  app.post(
    '/v1/files',
    {
      schema: { summary: 'Upload a file', tags: ['files'], response: { 200: httpSchema('File') } },
      config: {
        openapi: {
          requestBody: { required: true, content: { 'multipart/form-data': { schema: httpSchema('UploadFileForm') } } },
        },
      },
    },
    async (request) => {
      if (!request.isMultipart()) {
        throw invalidRequest('Expected a multipart/form-data body with the fields file and purpose', 'file', 'invalid_multipart');
      }
      const fileId = newFileId();
      const fields = new Map<string, string>();
      let stored: { blobKey: string; bytes: number; sha256: string; filename: string } | undefined;
      try {
        for await (const part of request.parts()) {
          if (part.type === 'field') {
            collectUploadField(fields, part, UPLOAD_FIELD_SIZE_LIMIT);
            continue;
          }
          if (part.fieldname !== 'file') throw invalidRequest(`Unexpected file field ${JSON.stringify(part.fieldname)}: send the content as "file"`, part.fieldname);
          checkEarlyPurpose(fields);
          const content = await deps.files.storeContent(fileId, part.file, uploadLimitFor(fields.get('purpose'), deps.limits), ownerOf(request.principal));
          stored = { ...content, filename: sanitizeFilename(part.filename) };
        }
        const form = parseUploadFields(fields);
        if (!stored) throw invalidRequest('Missing required parameter: file', 'file', 'missing_required_parameter');
        // The purpose may have come after the file: its own limit is checked now.
        const limit = uploadLimitFor(form.purpose, deps.limits);
        if (stored.bytes > limit.bytes) throw tooLarge(`File is too large: the ${limit.name} is ${limit.bytes} bytes`, 'file');
        // Over the account's storage limit: refused, and what was stored is removed (below).
        const owner = ownerOf(request.principal);
        const accountLimits = owner !== undefined ? deps.accountsQueries.limitsOf(owner) : undefined;
        const overStorage = owner !== undefined && accountLimits ? storageRefusal(accountLimits, deps.accountsQueries.storedBytesOf(owner), stored.bytes) : undefined;
        if (overStorage) throw new ApiError(400, overStorage, 'invalid_request_error', 'storage_limit_exceeded', 'file');

        const createdAt = deps.clock.nowSeconds();
        const facts: FileFacts = {
          fileId,
          filename: stored.filename,
          purpose: form.purpose,
          bytes: stored.bytes,
          sha256: stored.sha256,
          blobKey: stored.blobKey,
          createdAt,
          expiresAt: fileExpiresAt(form.purpose, createdAt, form.expiresAfter),
          ...(ownerOf(request.principal) !== undefined ? { accountId: ownerOf(request.principal)! } : {}),
        };
        const registered = await deps.files.register(facts, requestMetadata(request));
        stored = undefined; // registered (or discarded by register): no longer ours to remove
        if (E.isLeft(registered)) throw fromRejection(registered.left);
        return fileFromFacts(registered.right);
      } catch (error) {
        // A failed storeContent has left nothing behind; stored content that was not registered is removed.
        if (stored) await deps.files.discardContent(stored.blobKey);
        throw error;
      }
    },
  );

  app.get(
    '/v1/files',
    {
      schema: { summary: 'List files', tags: ['files'], querystring: httpSchema('ListFilesQuery'), response: { 200: httpSchema('FileList') } },
    },
    async (request) => {
      const query = request.query as FileListQuery;
      const after = query.after === '' ? undefined : query.after;
      let page;
      try {
        page = deps.owned.files(request.principal, { ...query, after }, deps.clock.nowSeconds());
      } catch (error) {
        if (error instanceof UnknownCursorError) throw invalidRequest(error.message, 'after');
        throw error;
      }
      return {
        object: 'list' as const,
        data: page.data.map(fileObject),
        ...pageBounds(page.data, after),
        has_more: page.hasMore,
      };
    },
  );

  const findFile = (principal: Principal, fileId: string): FileRow => {
    const row = deps.owned.file(principal, fileId, deps.clock.nowSeconds());
    if (!row) throw notFound(`No such File object: ${fileId}`, 'file_id');
    return row;
  };

  app.get(
    '/v1/files/:file_id',
    { schema: { summary: 'Retrieve a file', tags: ['files'], params: fileIdParams, response: { 200: httpSchema('File') } } },
    async (request) => fileObject(findFile(request.principal, (request.params as { file_id: string }).file_id)),
  );

  app.get(
    '/v1/files/:file_id/content',
    {
      schema: { summary: 'Retrieve file content', tags: ['files'], params: fileIdParams },
      config: {
        openapi: {
          responses: {
            200: {
              description: "The raw content of the file, with a content type from its name's extension",
              // Every type contentTypeOf can answer, without parameters (a media type key has none).
              content: Object.fromEntries(
                [...new Set([...Object.values(CONTENT_TYPES), 'application/octet-stream'].map((type) => type.split(';')[0]!))].map((type) => [
                  type,
                  { schema: { type: 'string', contentMediaType: type } },
                ]),
              ),
            },
          },
        },
      },
    },
    async (request, reply) => {
      const row = findFile(request.principal, (request.params as { file_id: string }).file_id);
      const content = await deps.files.openContent(row.blob_key);
      return reply
        .header('content-type', contentTypeOf(row.filename))
        .header('content-length', String(row.bytes))
        .header('content-disposition', contentDisposition(row.filename))
        .send(content);
    },
  );

  app.delete(
    '/v1/files/:file_id',
    { schema: { summary: 'Delete a file', tags: ['files'], params: fileIdParams, response: { 200: httpSchema('DeletedFile') } } },
    async (request) => {
      const fileId = (request.params as { file_id: string }).file_id;
      findFile(request.principal, fileId); // an expired file is gone for clients, even before the sweeper records it; another account's is unknown
      const deleted = await deps.files.delete(fileId, requestMetadata(request));
      if (E.isLeft(deleted)) throw fromRejection(deleted.left);
      return { id: fileId, object: 'file' as const, deleted: true as const };
    },
  );
}
