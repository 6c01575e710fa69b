import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedMessageLog } from '../src/message-log/embedded-message-log.js';
import { BATCH_EVENTS_TOPIC, WORK_TOPICS } from '../src/messages/topics.js';
import { chatLine, createBatch, reserveJob, waitForStatus } from './support/batch-helpers.js';
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
