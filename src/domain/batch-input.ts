// Rules for a batch's JSONL input file (spec §2.6, §4.1, §8), as pure functions.
import type { BatchEndpoint, BatchError } from './batch.js';

export const MAX_REQUESTS_PER_BATCH = 50_000;
export const MAX_EMBEDDING_INPUTS_PER_BATCH = 50_000;
/** At most this many errors are listed for one batch; the rest are counted in the last entry. */
export const MAX_LISTED_ERRORS = 1_000;

export interface InputLine {
  readonly custom_id: string;
  readonly method: 'POST';
  readonly url: BatchEndpoint;
  readonly body: Record<string, unknown>;
}

export type LineCheck = { readonly ok: true; readonly line: InputLine; readonly embeddingInputs: number } | { readonly ok: false; readonly error: BatchError };

const fail = (code: string, line: number, message: string, param: string | null): LineCheck => ({ ok: false, error: { code, line, message, param } });

/** Whether a physical line holds no request at all (blank lines are skipped, not errors). */
export const isBlank = (text: string): boolean => text.trim() === '';

/**
 * One line of the input file against the batch: JSON object with a string custom_id, method
 * POST, url equal to the batch endpoint, an object body whose model (if any) is the job's.
 * Uniqueness of custom_id is the caller's to track across lines.
 */
export function checkInputLine(text: string, lineNumber: number, batch: { endpoint: BatchEndpoint; model: string }): LineCheck {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return fail('invalid_json_line', lineNumber, `Line ${lineNumber} is not valid JSON`, null);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return fail('invalid_json_line', lineNumber, `Line ${lineNumber} is not a JSON object`, null);
  }
  const request = parsed as Record<string, unknown>;
  if (typeof request.custom_id !== 'string' || request.custom_id === '') {
    return fail('invalid_request', lineNumber, `Line ${lineNumber}: custom_id must be a non-empty string`, 'custom_id');
  }
  if (request.method !== 'POST') {
    return fail('invalid_request', lineNumber, `Line ${lineNumber}: method must be POST, got ${JSON.stringify(request.method ?? null)}`, 'method');
  }
  if (request.url !== batch.endpoint) {
    return fail('url_mismatch', lineNumber, `Line ${lineNumber}: url ${JSON.stringify(request.url ?? null)} does not match the batch endpoint ${batch.endpoint}`, 'url');
  }
  const body = request.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return fail('invalid_request', lineNumber, `Line ${lineNumber}: body must be a JSON object`, 'body');
  }
  const model = (body as Record<string, unknown>).model;
  if (model !== undefined && model !== batch.model) {
    return fail('model_mismatch', lineNumber, `Line ${lineNumber}: body.model ${JSON.stringify(model)} is not this batch's model ${JSON.stringify(batch.model)}`, 'body.model');
  }
  const embeddingInputs = batch.endpoint === '/v1/embeddings' ? countEmbeddingInputs((body as Record<string, unknown>).input) : 0;
  return {
    ok: true,
    line: { custom_id: request.custom_id, method: 'POST', url: batch.endpoint, body: body as Record<string, unknown> },
    embeddingInputs,
  };
}

/** Inputs in an embeddings request: a string or one token array is one; an array of them, each. */
export function countEmbeddingInputs(input: unknown): number {
  if (!Array.isArray(input)) return 1;
  if (input.length > 0 && input.every((item) => typeof item === 'number')) return 1;
  return input.length;
}
