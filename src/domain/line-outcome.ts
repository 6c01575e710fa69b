// A line's outcome (stream batchlines-<batch_id>-<chunk>): the events' data, their ids, and how a
// failed line reads in the batch's errors. Pure.
import type { BatchError } from './batch.js';
import { orderedUuids } from './derived-ids.js';
import { ID_PREFIX } from './id-prefixes.js';
import { JsonText } from './json-text.js';

/** Tokens an engine reports for one request (OpenAI's usage object). */
export interface Usage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
  /** Prompt tokens served from the engine's prefix cache; present only when the engine reports it. */
  readonly cached_tokens?: number;
  /** Completion tokens spent on reasoning; present only when the engine reports it. */
  readonly reasoning_tokens?: number;
}

export const ZERO_USAGE: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

/**
 * The replica that answered a line and the weights it served then: a checkpoint folder or the
 * s3:// location it was synced from (a server's base URL until a sync reloads it), and the weight
 * sync that put them there, if one did.
 */
export interface ServedBy {
  readonly replica: string;
  readonly checkpoint: string;
  readonly sync_id?: string;
}

export interface LineCompletedData {
  readonly batch_id: string;
  readonly line: number;
  readonly custom_id: string;
  readonly request_id: string;
  readonly status_code: number;
  /** Which replica and weights answered (absent in outcomes recorded before it was kept). */
  readonly served_by?: ServedBy;
  readonly body: unknown;
  readonly usage: Usage;
}

export interface LineFailedData {
  readonly batch_id: string;
  readonly line: number;
  readonly custom_id: string;
  readonly request_id: string | null;
  readonly status_code: number | null;
  /** Which replica and weights answered; absent where none did. */
  readonly served_by?: ServedBy;
  readonly body: unknown;
  readonly error: { readonly code: string; readonly message: string } | null;
  readonly usage: Usage;
}

export type LineOutcome = { readonly type: 'LineCompleted'; readonly data: LineCompletedData } | { readonly type: 'LineFailed'; readonly data: LineFailedData };

/**
 * A line number takes 8 hex digits of its outcome's id (a 200 MB input holds far fewer than 2^32
 * lines), so that 46 bits of the batch's hash follow its 44 bits of time: two batches created in
 * the same millisecond share their outcomes' ids once in 2^46 pairs (a shared id would refuse
 * the second batch's outcomes as another append's). With 48 bits for the line, 30 bits were left.
 */
const LINE_NUMBER_DIGITS = 8;

/**
 * One id per input line, whatever its outcome, in line order within the batch. A group of
 * outcomes then lands on a few pages of the log's id index and of the history's, where ids from
 * a hash put each line on a page of its own (about one page written per line and commit). The
 * batch id's first 11 digits lead (the time it was minted, newBatchId), so batches' lines sort
 * by when the batches were created: a new batch's lines go to the indexes' right edges, not to
 * a page anywhere in them. Which lines a chunk's stream already holds is told by their line
 * numbers, not by these ids: earlier versions derived them otherwise (a hash of batch and line,
 * then of the batch alone), and a chunk run again after an upgrade records only the lines its
 * stream lacks (LineOutcomeLog).
 */
export const lineOutcomeEventIds = (batchId: string): ((line: number) => string) =>
  orderedUuids(`${batchId}/lines`, { lead: batchTimeDigits(batchId), numberDigits: LINE_NUMBER_DIGITS });

/** A batch id's first 11 hex digits (its time, for the ids newBatchId mints); none for an id of another shape. */
function batchTimeDigits(batchId: string): string {
  const digits = batchId.slice(ID_PREFIX.batch.length, ID_PREFIX.batch.length + 11);
  return batchId.startsWith(ID_PREFIX.batch) && /^[0-9a-f]{11}$/.test(digits) ? digits : '';
}

/** One line's id alone (a batch's lines are made by lineOutcomeEventIds, which hashes the batch once). */
export const lineOutcomeEventId = (batchId: string, line: number): string => lineOutcomeEventIds(batchId)(line);

/**
 * The JSON text of an outcome's data where its body is a JsonText (the body's text spliced in,
 * last); undefined where the body is parsed, which JSON.stringify writes as it is.
 */
export function lineOutcomeDataJson(data: LineCompletedData | LineFailedData): string | undefined {
  if (!(data.body instanceof JsonText)) return undefined;
  const { body, ...rest } = data;
  return `${JSON.stringify(rest).slice(0, -1)},"body":${body.text}}`;
}

/** An outcome's data without its body. */
export type LineOutcomeFields = Omit<LineCompletedData, 'body'> | Omit<LineFailedData, 'body'>;

const BODY_KEY = ',"body":';

/**
 * An outcome's data but its body, read from the data's JSON text without parsing the body where
 * the text puts it last (as lineOutcomeDataJson writes it); undefined otherwise (parse it all).
 * Every value before the body is Spool's own or a JSON string, in which a quote is escaped, so the
 * first `,"body":` in the text is the body's key.
 */
export function lineOutcomeFields(type: 'LineCompleted' | 'LineFailed', text: string): LineOutcomeFields | undefined {
  return fieldsBeforeBody(type, text, text.indexOf(BODY_KEY));
}

/**
 * An outcome's data from the JSON text lineOutcomeDataJson wrote, its body the text it was written
 * with (a JsonText, as when it was recorded): a chunk rendered again from the log has the bytes it
 * had when rendered as it ran, whatever the engine's way of writing numbers. Undefined for text of
 * another layout (parse it all).
 */
export function lineOutcomeFromText(type: 'LineCompleted' | 'LineFailed', text: string): LineCompletedData | LineFailedData | undefined {
  const at = text.indexOf(BODY_KEY);
  const fields = fieldsBeforeBody(type, text, at);
  // The body is the data's last value (lineOutcomeDataJson), so it runs to the closing brace.
  return fields && { ...fields, body: new JsonText(text.slice(at + BODY_KEY.length, -1)) };
}

function fieldsBeforeBody(type: 'LineCompleted' | 'LineFailed', text: string, at: number): LineOutcomeFields | undefined {
  if (at < 0) return undefined;
  let fields: Partial<LineFailedData>;
  try {
    fields = JSON.parse(`${text.slice(0, at)}}`) as Partial<LineFailedData>;
  } catch {
    return undefined;
  }
  // Written with its body elsewhere (earlier versions put usage after it): what came before is not all of it.
  if (typeof fields.batch_id !== 'string' || typeof fields.usage !== 'object' || fields.usage === null) return undefined;
  if (type === 'LineFailed' && !('error' in fields)) return undefined;
  return fields as LineOutcomeFields;
}

/** A failed line as an entry of the batch's errors.data (spec §7). */
export function lineError(data: LineFailedData): BatchError {
  const engineError = (data.body as { error?: { code?: unknown; message?: unknown; param?: unknown } } | null)?.error;
  return {
    code: data.error?.code ?? (typeof engineError?.code === 'string' ? engineError.code : `http_${data.status_code ?? 0}`),
    line: data.line,
    message: data.error?.message ?? (typeof engineError?.message === 'string' ? engineError.message : `The engine answered ${data.status_code}`),
    param: typeof engineError?.param === 'string' ? engineError.param : null,
  };
}
