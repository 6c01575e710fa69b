import { describe, expect, it } from 'vitest';
import { outputFileId } from '../../src/domain/batch-output.js';
import { ID_PREFIX } from '../../src/domain/id-prefixes.js';
import { webhookEventId } from '../../src/domain/webhook.js';
import {
  newBatchId,
  newCompletionId,
  newEngineRequestId,
  newEventId,
  newFileId,
  newRequestId,
  newResponseId,
  newResponseMessageId,
  newWebhookId,
  newWeightSyncId,
} from '../../src/platform/ids.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('ids', () => {
  it.each([
    ['a file', newFileId, /^file-[0-9a-f]{24}$/],
    ['a batch', newBatchId, /^batch_[0-9a-f]{24}$/],
    ['a webhook', newWebhookId, /^wh_[0-9a-f]{24}$/],
    ['a weight sync', newWeightSyncId, /^sync_[0-9a-f]{24}$/],
    ['an event', newEventId, UUID],
    ['an HTTP request', newRequestId, UUID],
    ['an engine request', newEngineRequestId, /^req_[0-9a-f]{32}$/],
    ['a chat completion', () => newCompletionId(true), /^chatcmpl-[0-9a-f]{32}$/],
    ['a completion', () => newCompletionId(false), /^cmpl-[0-9a-f]{32}$/],
    ['a response', newResponseId, /^resp_[0-9a-f]{32}$/],
    ['a response message', newResponseMessageId, /^msg_[0-9a-f]{32}$/],
  ] as const)('minted for %s have their shape and never repeat', (_what, mint, shape) => {
    const ids = Array.from({ length: 100 }, mint);
    for (const id of ids) expect(id).toMatch(shape);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('derived from names take their prefix from the same table, and are the same for the same name', () => {
    expect(outputFileId('batch_1', 'output')).toMatch(new RegExp(`^${ID_PREFIX.file}[0-9a-f]{24}$`));
    expect(outputFileId('batch_1', 'output')).toBe(outputFileId('batch_1', 'output'));
    expect(outputFileId('batch_1', 'output')).not.toBe(outputFileId('batch_1', 'error'));
    expect(webhookEventId('batch_1', 'batch.completed')).toMatch(new RegExp(`^${ID_PREFIX.webhookEvent}[0-9a-f]{24}$`));
  });
});
