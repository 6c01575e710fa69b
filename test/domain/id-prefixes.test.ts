import { describe, expect, it } from 'vitest';
import { outputFileId } from '../../src/domain/batch-output.js';
import { ID_PREFIX } from '../../src/domain/id-prefixes.js';
import { lineOutcomeEventId } from '../../src/domain/line-outcome.js';
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

  it.each([
    ['batches', newBatchId],
    ['files', newFileId],
    ['events', newEventId],
  ] as const)('of %s sort by when they were minted, so indexes keyed by them grow at their right edge', async (_what, mint) => {
    const earlier = Array.from({ length: 50 }, mint);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const later = Array.from({ length: 50 }, mint);
    for (const id of later) expect(earlier.every((before) => before < id)).toBe(true);
    // The time leads; the rest is random: ids of one millisecond differ.
    expect(new Set([...earlier, ...later]).size).toBe(100);
  });

  it("of a batch's line outcomes sort by the batch's time, then by line, and are the same for the same batch and line", async () => {
    const first = newBatchId();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const second = newBatchId();
    expect(lineOutcomeEventId(first, 999)).toMatch(UUID);
    expect(lineOutcomeEventId(first, 999) < lineOutcomeEventId(second, 0)).toBe(true);
    expect(lineOutcomeEventId(first, 1) < lineOutcomeEventId(first, 2)).toBe(true);
    expect(lineOutcomeEventId(first, 7)).toBe(lineOutcomeEventId(first, 7));
    // Two batches of one millisecond: the same lead, ids of their own (46 bits of hash apart).
    const sameTime = (random: string) => `${first.slice(0, ID_PREFIX.batch.length + 11)}${random}`;
    expect(lineOutcomeEventId(sameTime('0000000000000'), 3)).not.toBe(lineOutcomeEventId(sameTime('0000000000001'), 3));
    expect(lineOutcomeEventId(sameTime('0000000000000'), 3).slice(0, 12)).toBe(lineOutcomeEventId(sameTime('0000000000001'), 3).slice(0, 12));
    // A line number takes 8 hex digits: more lines than a 200 MB input can hold are refused, not wrapped.
    expect(lineOutcomeEventId(first, 2 ** 32 - 1)).toMatch(/ffffffff$/);
    expect(() => lineOutcomeEventId(first, 2 ** 32)).toThrow(RangeError);
    // Batch ids of another shape (earlier versions', tests') still get ids of their own.
    expect(lineOutcomeEventId('batch_x', 7)).toMatch(UUID);
    expect(lineOutcomeEventId('batch_x', 7)).not.toBe(lineOutcomeEventId('batch_y', 7));
  });

  it('derived from names take their prefix from the same table, and are the same for the same name', () => {
    expect(outputFileId('batch_1', 'output')).toMatch(new RegExp(`^${ID_PREFIX.file}[0-9a-f]{24}$`));
    expect(outputFileId('batch_1', 'output')).toBe(outputFileId('batch_1', 'output'));
    expect(outputFileId('batch_1', 'output')).not.toBe(outputFileId('batch_1', 'error'));
    expect(webhookEventId('batch_1', 'batch.completed')).toMatch(new RegExp(`^${ID_PREFIX.webhookEvent}[0-9a-f]{24}$`));
  });
});
