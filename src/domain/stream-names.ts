// Stream names: what each stream is called, and what a name says. Makers and parser share one
// table of prefixes, so a name made here always parses back.

const PREFIX = {
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
export const jobStreamName = (jobId: string): string => `${PREFIX.job}${jobId}`;
export const weightsStreamName = (model: string): string => `${PREFIX.weights}${model}`;
export const webhookStreamName = (webhookId: string): string => `${PREFIX.webhook}${webhookId}`;
/** One transition's delivery to one webhook; webhook and event ids hold no dot. */
export const webhookDeliveryStreamName = (webhookId: string, eventId: string): string => `${PREFIX.webhookdelivery}${webhookId}.${eventId}`;

/** A stream's kind and the id of its subject (a batch, file, job or model serve name). */
export type ParsedStreamName =
  | { readonly kind: 'batch' | 'file' | 'job' | 'weights'; readonly id: string }
  | { readonly kind: 'batchlines'; readonly id: string; readonly chunk: number }
  | { readonly kind: 'webhook'; readonly id: string }
  | { readonly kind: 'webhookdelivery'; readonly id: string; readonly eventId: string };

export type StreamKind = ParsedStreamName['kind'];

/** What a stream's name says; undefined for a name none of the makers above produces. */
export function parseStreamName(name: string): ParsedStreamName | undefined {
  if (name.startsWith(PREFIX.batchlines)) {
    // The chunk follows the last dash.
    const match = /^(.+)-(\d+)$/.exec(name.slice(PREFIX.batchlines.length));
    return match ? { kind: 'batchlines', id: match[1]!, chunk: Number(match[2]) } : undefined;
  }
  if (name.startsWith(PREFIX.webhookdelivery)) {
    const match = /^([^.]+)\.([^.]+)$/.exec(name.slice(PREFIX.webhookdelivery.length));
    return match ? { kind: 'webhookdelivery', id: match[1]!, eventId: match[2]! } : undefined;
  }
  for (const kind of ['batch', 'file', 'job', 'weights', 'webhook'] as const) {
    if (name.startsWith(PREFIX[kind]) && name.length > PREFIX[kind].length) return { kind, id: name.slice(PREFIX[kind].length) };
  }
  return undefined;
}
