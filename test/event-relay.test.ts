import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { pino } from 'pino';
import { EventRelay, MemoryRelayCheckpoint } from '../processors/messaging/event-relay.js';
import { comparePositions } from '../src/event-store/event-store.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedMessageLog } from '../src/message-log/embedded-message-log.js';
import { BATCH_EVENTS_TOPIC, MessageSchemas, WORK_TOPICS, spoolTopics } from '../src/messages/topics.js';
import { chatLine, createBatch, reserveJob, waitFor, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { type WholeService, startTestService } from './support/service.js';

/** Messages a topic of the embedded log has taken since the start, over all its partitions. */
function published(log: EmbeddedMessageLog, topic: string): number {
  let total = 0;
  for (let index = 0; index < log.partitionCount(topic); index++) total += log.partition(topic, index).endOffset;
  return total;
}

// The public batch-events topic is for consumers outside the process (on Kafka: test/scale-out.test.ts
// reads it with the example consumer). Nobody can read the embedded log from outside, so there
// it would only hold memory: a thousand messages a partition, grown with every batch.
describe('the relay on the embedded default', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let client: OpenAI;

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({ env: { ENGINE_BASE_URL: engine.url, ENGINE_MODELS: 'tiny-chat' } });
    expect((await reserveJob(service.url, { job_id: 'relay-job', model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1 })).status).toBe(201);
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
  });
  afterAll(async () => {
    await service?.close();
    await engine.stop();
  });

  it('publishes the work of a batch and no batch-events message', async () => {
    const log = service.messageLog;
    expect(log).toBeInstanceOf(EmbeddedMessageLog);
    const lines = Array.from({ length: 3 }, (_, line) => chatLine(`r-${line}`, `hello ${line}`));
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'input.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'relay-job' });
    expect((await waitForStatus(client, batch.id, ['completed', 'failed', 'expired', 'cancelled'])).status).toBe('completed');
    const embedded = log as EmbeddedMessageLog;
    expect(published(embedded, WORK_TOPICS.validator)).toBeGreaterThanOrEqual(1);
    expect(published(embedded, WORK_TOPICS.inference)).toBeGreaterThanOrEqual(1);
    expect(published(embedded, BATCH_EVENTS_TOPIC)).toBe(0);
  });
});

/**
 * Downstream consumers route batch-events by account: each message of an account's batch names
 * it (in the value and the account-id header), whether the relay saw the batch created or starts
 * after that (then it reads the batch's first event). A batch of no account carries neither.
 */
describe('the relay: the account of a batch on batch-events', () => {
  it('names the batch’s account in every message, learned from BatchCreated or from the batch’s stream after a restart', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'relay-accounts-'));
    const eventStore = new SqliteEventStore(join(directory, 'events.sqlite'));
    const created = (batchId: string, account?: string) => ({
      id: randomUUID(),
      type: 'BatchCreated',
      data: { batch_id: batchId, input_file_id: 'file-1', endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'j', model: 'm', price_1m_tokens: 1, metadata: null, output_expires_after: null, created_at: 1, expires_at: null, ...(account ? { account_id: account } : {}) },
      metadata: { schemaVersion: 1 },
    });
    const cancelled = (batchId: string) => ({ id: randomUUID(), type: 'BatchCancelRequested', data: { batch_id: batchId, cancelling_at: 2 }, metadata: { schemaVersion: 1 } });
    await eventStore.appendToStream('batch-batch_a', [created('batch_a', 'acme')]);
    await eventStore.appendToStream('batch-batch_none', [created('batch_none')]);
    const run = async (checkpoint: MemoryRelayCheckpoint) => {
      const log = new EmbeddedMessageLog();
      await log.ensureTopics(spoolTopics(1));
      const relay = new EventRelay({ eventStore, messageLog: log, schemas: new MessageSchemas(), checkpoint, log: pino({ level: 'silent' }), batchEvents: true });
      relay.start();
      const head = await eventStore.headPosition();
      await waitFor(async () => checkpoint.load() !== undefined && comparePositions(checkpoint.load()!, head!) >= 0, 'the relay to publish the log');
      await relay.stop();
      const messages = [];
      for (let index = 0; index < log.partitionCount(BATCH_EVENTS_TOPIC); index++) {
        const partition = log.partition(BATCH_EVENTS_TOPIC, index);
        for (let offset = 0; offset < partition.endOffset; offset++) messages.push(partition.at(offset)!);
      }
      return messages.map((message) => ({ type: (JSON.parse(message.value) as { event_type: string }).event_type, batch: message.key, account: (JSON.parse(message.value) as { account_id?: string }).account_id, header: message.headers['account-id'] }));
    };
    const checkpoint = new MemoryRelayCheckpoint();
    expect(await run(checkpoint)).toEqual(
      expect.arrayContaining([
        { type: 'BatchCreated', batch: 'batch_a', account: 'acme', header: 'acme' },
        { type: 'BatchCreated', batch: 'batch_none', account: undefined, header: undefined },
      ]),
    );
    // A new relay from that checkpoint has seen neither batch created.
    await eventStore.appendToStream('batch-batch_a', [cancelled('batch_a')]);
    await eventStore.appendToStream('batch-batch_none', [cancelled('batch_none')]);
    const after = await run(checkpoint);
    expect(after).toHaveLength(2);
    expect(after).toEqual(
      expect.arrayContaining([
        { type: 'BatchCancelRequested', batch: 'batch_a', account: 'acme', header: 'acme' },
        { type: 'BatchCancelRequested', batch: 'batch_none', account: undefined, header: undefined },
      ]),
    );
    await eventStore.close();
  });
});
