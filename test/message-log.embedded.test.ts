import { describe, expect, it } from 'vitest';
import { EmbeddedMessageLog } from '../src/message-log/embedded-message-log.js';
import { messageLogContract } from './support/message-log-contract.js';

messageLogContract('embedded (in process)', async () => new EmbeddedMessageLog());

describe('the embedded message log', () => {
  it('keeps memory bounded: a topic nobody consumes holds only about its newest `retain` messages', async () => {
    const log = new EmbeddedMessageLog({ retain: 1_000 });
    await log.ensureTopics([{ topic: 'unread', partitions: 1 }]);
    for (let index = 0; index < 3_000; index++) await log.publish('unread', [{ key: 'k', value: String(index) }]);
    const seen: number[] = [];
    const consumer = await log.consume({ groupId: 'late', topics: ['unread'] }, async (message) => void seen.push(Number(message.value)));
    const deadline = Date.now() + 5_000;
    while (seen[seen.length - 1] !== 2_999 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    await consumer.stop();
    await log.close();
    // Trimmed in steps of 256 messages, never below `retain`.
    expect(seen.length).toBeGreaterThanOrEqual(1_000);
    expect(seen.length).toBeLessThan(1_000 + 256);
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, index) => 3_000 - seen.length + index));
  });
});
