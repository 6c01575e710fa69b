import type { ExpiresAfter, UPLOAD_PURPOSES } from '../domain/file.js';
import { ApiError, invalidRequest } from './api-error.js';
import { compileSchema, httpSchema } from '../platform/schemas.js';
import { bodyRefusal } from './schema-refusals.js';

export type UploadPurpose = (typeof UPLOAD_PURPOSES)[number];

export interface UploadForm {
  readonly purpose: UploadPurpose;
  readonly expiresAfter?: ExpiresAfter;
}

const formSchema = httpSchema('UploadFileForm');
// The file part is streamed, not collected: the fields are checked without it.
const { file: _streamed, ...fieldProperties } = formSchema.properties as Record<string, unknown>;
const fieldsSchema = { ...formSchema, required: ['purpose'], properties: fieldProperties };
const validateFields = compileSchema<{ purpose: UploadPurpose; expires_after?: ExpiresAfter }>(fieldsSchema);
const purposes = (formSchema.properties as { purpose: { enum: string[] } }).purpose.enum;

/** The largest text field of an upload form, in bytes (the multipart parser's fieldSize). */
export const UPLOAD_FIELD_SIZE_LIMIT = 64 * 1024;

/** A text part of the form, as @fastify/multipart hands it over. */
export interface UploadFieldPart {
  readonly fieldname: string;
  /** Text, or already parsed when the part declared Content-Type: application/json. */
  readonly value: unknown;
  readonly valueTruncated: boolean;
}

/**
 * Adds one text part to the fields read so far. A field sent twice is refused, naming it, rather
 * than one of the values silently winning; so is a value cut short by the multipart size limit.
 */
export function collectUploadField(fields: Map<string, string>, part: UploadFieldPart, fieldSizeLimit: number): void {
  if (part.valueTruncated) {
    throw new ApiError(413, `The field ${JSON.stringify(part.fieldname)} is over the limit of ${fieldSizeLimit} bytes for a form field`, 'invalid_request_error', 'field_too_large', part.fieldname);
  }
  if (fields.has(part.fieldname)) {
    throw invalidRequest(`The field ${JSON.stringify(part.fieldname)} was sent more than once: send it once`, part.fieldname, 'duplicate_parameter');
  }
  fields.set(part.fieldname, typeof part.value === 'string' ? part.value : JSON.stringify(part.value));
}

/** The purpose, if it came before the file, checked at once so a bad upload is refused unread. */
export function checkEarlyPurpose(fields: ReadonlyMap<string, string>): void {
  const purpose = fields.get('purpose');
  if (purpose !== undefined && !purposes.includes(purpose)) throw badPurpose(purpose);
}

const badPurpose = (purpose: string) =>
  invalidRequest(`Invalid purpose ${JSON.stringify(purpose)}: expected one of ${purposes.join(', ')}`, 'purpose');

/** The form's fields once every part has been read; unknown fields are ignored. */
export function parseUploadFields(fields: ReadonlyMap<string, string>): UploadForm {
  const purpose = fields.get('purpose');
  if (purpose === undefined || purpose === '') {
    throw invalidRequest('Missing required parameter: purpose', 'purpose', 'missing_required_parameter');
  }
  if (!purposes.includes(purpose)) throw badPurpose(purpose);
  const candidate: Record<string, unknown> = { purpose };
  const expiresAfter = readExpiresAfter(fields);
  if (expiresAfter !== undefined) candidate.expires_after = expiresAfter;
  // Worded as a JSON body's refusal: the first problem, the field and the rule it broke.
  if (!validateFields(candidate)) throw bodyRefusal(validateFields.errors?.[0]);
  return {
    purpose: candidate.purpose as UploadPurpose,
    ...(candidate.expires_after ? { expiresAfter: candidate.expires_after as ExpiresAfter } : {}),
  };
}

/** expires_after as the SDKs send it (bracketed fields) or as one JSON field. */
function readExpiresAfter(fields: ReadonlyMap<string, string>): unknown {
  const json = fields.get('expires_after');
  const anchor = fields.get('expires_after[anchor]');
  const seconds = fields.get('expires_after[seconds]');
  if (json !== undefined) {
    if (anchor !== undefined || seconds !== undefined) {
      throw invalidRequest('Send expires_after either as JSON or as expires_after[anchor] and expires_after[seconds], not both', 'expires_after');
    }
    try {
      return JSON.parse(json) as unknown;
    } catch {
      throw invalidRequest('expires_after must be a JSON object {"anchor": "created_at", "seconds": <integer>}', 'expires_after');
    }
  }
  if (anchor === undefined && seconds === undefined) return undefined;
  const result: Record<string, unknown> = {};
  if (anchor !== undefined) result.anchor = anchor;
  if (seconds !== undefined) result.seconds = /^-?\d+$/.test(seconds) ? Number(seconds) : seconds;
  return result;
}
