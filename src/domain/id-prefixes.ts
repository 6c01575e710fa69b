// What each kind of id starts with, in one table: the ids minted at random (src/platform/ids.ts)
// and those derived from names (derived-ids.ts) take their prefix from here, so a kind of id is
// spelled once whichever way it is made.

export const ID_PREFIX = {
  /** Files, uploaded (minted) or a batch's output and error files (derived). */
  file: 'file-',
  batch: 'batch_',
  /** A batch's output line (derived from the batch and the line). */
  batchRequest: 'batch_req_',
  webhook: 'wh_',
  /** One batch transition as webhooks announce it (derived from the batch and the transition). */
  webhookEvent: 'evt_',
  weightSync: 'sync_',
  /** A key of an account (ACCOUNTS=required), and the key itself (shown once). */
  accountKey: 'key_',
  accountSecret: 'sk-spool-',
  // The OpenAI shapes of what an engine answers.
  engineRequest: 'req_',
  chatCompletion: 'chatcmpl-',
  completion: 'cmpl-',
  response: 'resp_',
  responseMessage: 'msg_',
} as const;
