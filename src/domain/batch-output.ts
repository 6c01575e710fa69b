// The lines of a batch's output and error files, and where a chunk's are kept once rendered. Pure:
// the same outcomes always render to the same bytes, so a chunk rendered while the batch runs and
// one rendered by the finalizer are interchangeable.
import { derivedId } from './derived-ids.js';
import type { LineCompletedData, LineFailedData } from './line-outcome.js';

export type OutputKind = 'output' | 'error';

/** One output or error file line, in the OpenAI batch line shape; undefined when the outcome belongs to the other file. */
export function outputLine(batchId: string, kind: OutputKind, data: LineCompletedData | LineFailedData): string | undefined {
  const failed = 'error' in data;
  if ((kind === 'error') !== failed) return undefined;
  const response = data.status_code === null ? null : { status_code: data.status_code, request_id: data.request_id, body: data.body };
  return `${JSON.stringify({
    id: derivedId('batch_req_', `${batchId}/line/${data.line}`),
    custom_id: data.custom_id,
    response,
    error: failed ? ((data as LineFailedData).error ?? null) : null,
  })}\n`;
}

/** A chunk's lines of one file, in line order (`outcomes` sorted by line). */
export function renderChunk(batchId: string, kind: OutputKind, outcomes: ReadonlyArray<LineCompletedData | LineFailedData>): string {
  // One string per chunk, not per line: each write costs a trip through the streams.
  let text = '';
  for (const outcome of outcomes) text += outputLine(batchId, kind, outcome) ?? '';
  return text;
}

/** Where a chunk's rendered lines of one file are kept while its batch runs (both files' parts, even empty). */
export const chunkPartBlobKey = (batchId: string, chunk: number, kind: OutputKind): string => `batches/${batchId}/parts/${chunk}.${kind}.jsonl`;

/** The prefix under which all of a batch's chunk parts are kept. */
export const chunkPartsPrefix = (batchId: string): string => `batches/${batchId}/parts/`;

/** The batch whose chunk part a blob key names, or undefined for any other key. */
export function batchIdOfChunkPartKey(key: string): string | undefined {
  return /^batches\/([^/]+)\/parts\/\d+\.(?:output|error)\.jsonl$/.exec(key)?.[1];
}
