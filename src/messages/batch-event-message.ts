/** One change in a batch's life, on the public batch-events topic (schemas/messages/batch-event.v1.json). */
export interface BatchEventMessage {
  /** The account that owns the batch (ACCOUNTS=required); absent otherwise. */
  account_id?: string;
  event_id: string;
  event_type: string;
  schema_version: number;
  batch_id: string;
  status: string | null;
  stream: string;
  revision: number;
  position: string;
  recorded_at: number;
  data: Record<string, unknown>;
}
