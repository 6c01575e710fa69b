// Stream names: what each stream is called, and what a name says. Makers and parser share one
// table of prefixes, so a name made here always parses back.

const PREFIX = {
  account: 'account-',
  batch: 'batch-',
  batchlines: 'batchlines-',
  file: 'file-',
  job: 'job-',
  weights: 'weights-',
  webhook: 'webhook-',
  webhookdelivery: 'webhookdelivery-',
} as const;

export const batchStreamName = (batchId: string): string => `${PREFIX.batch}${batchId}`;
export const batchLinesStreamName = (batchId: string, chunk: number): string => `${PREFIX.batchlines}${batchId}-${chunk}`;
export const fileStreamName = (fileId: string): string => `${PREFIX.file}${fileId}`;
export const accountStreamName = (accountId: string): string => `${PREFIX.account}${accountId}`;
export const jobStreamName = (jobId: string): string => `${PREFIX.job}${jobId}`;
export const weightsStreamName = (model: string): string => `${PREFIX.weights}${model}`;
export const webhookStreamName = (webhookId: string): string => `${PREFIX.webhook}${webhookId}`;
/** One transition's delivery to one webhook; webhook and event ids hold no dot. */
export const webhookDeliveryStreamName = (webhookId: string, eventId: string): string => `${PREFIX.webhookdelivery}${webhookId}.${eventId}`;

/** A stream's kind and the id of its subject (a batch, file, job or model serve name). */
export type ParsedStreamName =
  | { readonly kind: 'account' | 'batch' | 'file' | 'job' | 'weights'; readonly id: string }
  | { readonly kind: 'batchlines'; readonly id: string; readonly chunk: number }
  | { readonly kind: 'webhook'; readonly id: string }
  | { readonly kind: 'webhookdelivery'; readonly id: string; readonly eventId: string };

export type StreamKind = ParsedStreamName['kind'];

/** Where a line-outcome stream's chunk number starts (after its last dash, digits only, after an id of at least one character); -1 when the name is not one. */
function chunkDash(name: string): number {
  const dash = name.lastIndexOf('-');
  if (dash <= PREFIX.batchlines.length || dash === name.length - 1) return -1;
  for (let at = dash + 1; at < name.length; at++) {
    const code = name.charCodeAt(at);
    if (code < 48 || code > 57) return -1;
  }
  return dash;
}

/** Where a delivery stream's one dot is (between two non-empty parts); -1 when the name is not one. */
function deliveryDot(name: string): number {
  const dot = name.indexOf('.', PREFIX.webhookdelivery.length);
  if (dot <= PREFIX.webhookdelivery.length || dot === name.length - 1 || name.indexOf('.', dot + 1) !== -1) return -1;
  return dot;
}

const WHOLE_ID_KINDS = ['account', 'batch', 'file', 'job', 'weights', 'webhook'] as const;

/**
 * What kind of stream a name is, as parseStreamName says, without making anything: the readers
 * of the log ask it of every event, most of them line outcomes.
 */
export function streamKind(name: string): StreamKind | undefined {
  if (name.startsWith(PREFIX.batchlines)) return chunkDash(name) === -1 ? undefined : 'batchlines';
  if (name.startsWith(PREFIX.webhookdelivery)) return deliveryDot(name) === -1 ? undefined : 'webhookdelivery';
  for (const kind of WHOLE_ID_KINDS) if (name.startsWith(PREFIX[kind]) && name.length > PREFIX[kind].length) return kind;
  return undefined;
}

/**
 * What a stream's name says; undefined for a name none of the makers above produces. Without
 * regular expressions: every reader of the log asks of every event, and a match's array and
 * groups were a good part of what each event cost them.
 */
export function parseStreamName(name: string): ParsedStreamName | undefined {
  if (name.startsWith(PREFIX.batchlines)) {
    const dash = chunkDash(name);
    return dash === -1 ? undefined : { kind: 'batchlines', id: name.slice(PREFIX.batchlines.length, dash), chunk: Number(name.slice(dash + 1)) };
  }
  if (name.startsWith(PREFIX.webhookdelivery)) {
    const dot = deliveryDot(name);
    return dot === -1 ? undefined : { kind: 'webhookdelivery', id: name.slice(PREFIX.webhookdelivery.length, dot), eventId: name.slice(dot + 1) };
  }
  for (const kind of WHOLE_ID_KINDS) {
    if (name.startsWith(PREFIX[kind]) && name.length > PREFIX[kind].length) return { kind, id: name.slice(PREFIX[kind].length) };
  }
  return undefined;
}
