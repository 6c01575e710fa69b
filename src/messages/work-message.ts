/**
 * What the relay asks a processor to look at (schemas/messages/work-message.v1.json): a subject
 * and the log position of the event behind it, never state, so a message delivered twice does
 * nothing the second time.
 */
export type WorkMessage =
  | { kind: 'validate-batch'; batch_id: string; position: string; event_id: string }
  | { kind: 'run-chunk'; batch_id: string; chunk: number; position: string; event_id: string }
  | { kind: 'finalize-batch'; batch_id: string; position: string; event_id: string }
  | { kind: 'sync-weights'; model: string; position: string; event_id: string };
