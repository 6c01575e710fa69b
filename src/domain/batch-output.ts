// The lines of a batch's output and error files (where a chunk's are kept once rendered: blob-keys.ts). Pure:
// the same outcomes always render to the same bytes, so a chunk rendered while the batch runs and
// one rendered by the finalizer are interchangeable.
import { derivedId } from './derived-ids.js';
import { ID_PREFIX } from './id-prefixes.js';
import { JsonText } from './json-text.js';
import type { LineCompletedData, LineFailedData } from './line-outcome.js';

export type OutputKind = 'output' | 'error';

/**
 * The metadata key a batch sets to "true" to have each output and error line name the replica and
 * weights that answered it (`served_by`, after OpenAI's fields); without it the lines keep
 * OpenAI's shape exactly. The outcome events record it either way.
 */
export const SERVED_BY_METADATA_KEY = 'spool_served_by';

/** Whether a batch's metadata (as stored: its JSON text, or null) asks for `served_by` in its output lines. */
export function servedByInOutput(metadata: string | null | undefined): boolean {
  if (!metadata || !metadata.includes(SERVED_BY_METADATA_KEY)) return false;
  return (JSON.parse(metadata) as Record<string, unknown>)[SERVED_BY_METADATA_KEY] === 'true';
}

/**
 * One output or error file line, in the OpenAI batch line shape; undefined when the outcome
 * belongs to the other file. `servedBy`: add the outcome's `served_by` (SERVED_BY_METADATA_KEY).
 */
export function outputLine(batchId: string, kind: OutputKind, data: LineCompletedData | LineFailedData, servedBy = false): string | undefined {
  const failed = 'error' in data;
  if ((kind === 'error') !== failed) return undefined;
  const id = derivedId(ID_PREFIX.batchRequest, `${batchId}/line/${data.line}`);
  const error = failed ? ((data as LineFailedData).error ?? null) : null;
  const served = servedBy ? `,"served_by":${JSON.stringify(data.served_by ?? null)}` : '';
  if (data.body instanceof JsonText && data.status_code !== null) {
    // The same bytes as JSON.stringify of the object below, with the body's text spliced in
    // rather than written out again from a parsed body.
    return `{"id":${JSON.stringify(id)},"custom_id":${JSON.stringify(data.custom_id)},"response":{"status_code":${JSON.stringify(data.status_code)},"request_id":${JSON.stringify(data.request_id)},"body":${data.body.text}},"error":${JSON.stringify(error)}${served}}\n`;
  }
  const response = data.status_code === null ? null : { status_code: data.status_code, request_id: data.request_id, body: data.body };
  return `${JSON.stringify({ id, custom_id: data.custom_id, response, error, ...(servedBy ? { served_by: data.served_by ?? null } : {}) })}\n`;
}

/** The id of a batch's output or error file: the same whichever finalizer writes it. */
export const outputFileId = (batchId: string, kind: OutputKind): string => derivedId(ID_PREFIX.file, `${batchId}/${kind}`);

/** A chunk's lines of one file, in line order (`outcomes` sorted by line). */
export function renderChunk(batchId: string, kind: OutputKind, outcomes: ReadonlyArray<LineCompletedData | LineFailedData>, servedBy = false): string {
  // One string per chunk, not per line: each write costs a trip through the streams.
  let text = '';
  for (const outcome of outcomes) text += outputLine(batchId, kind, outcome, servedBy) ?? '';
  return text;
}
