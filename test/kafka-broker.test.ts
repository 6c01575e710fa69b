import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Consumer, type Kafka, type KafkaMessage, logLevel } from 'kafkajs';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { type KafkaBroker, kafkaClient, startKafkaBroker } from './support/kafka-broker.js';

// A short fetch wait: disconnecting a consumer waits for its fetch in flight (5 s by default).
const consumerOptions = { maxWaitTimeInMs: 100 };

function client(brokers: string, retries = 5): Kafka {
  return kafkaClient({ clientId: 'kafka-broker-test', brokers: [brokers], logLevel: logLevel.NOTHING, retry: { retries } });
}

/** Runs the consumer until `count` messages arrived. */
async function consume(consumer: Consumer, count: number, options: { autoCommit?: boolean } = {}): Promise<KafkaMessage[]> {
  const received: KafkaMessage[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${received.length} of ${count} messages within 30 s`)), 30_000);
    void consumer
      .run({
        autoCommit: options.autoCommit ?? true,
        eachMessage: async ({ message }) => {
          received.push(message);
          if (received.length >= count) {
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  return received;
}

async function committedOffsets(kafka: Kafka, groupId: string, topic: string): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const [answer] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return (answer?.partitions ?? []).sort((a, b) => a.partition - b.partition).map((p) => p.offset);
  } finally {
    await admin.disconnect();
  }
}

async function topics(kafka: Kafka): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await admin.listTopics();
  } finally {
    await admin.disconnect();
  }
}

describe('the test run’s Kafka broker', () => {
  it('carries a message from a producer to a consumer group', async () => {
    const kafka = client(inject('kafkaBrokers'));
    const topic = `broker-smoke-${randomUUID()}`;
    const producer = kafka.producer({ allowAutoTopicCreation: true });
    const consumer = kafka.consumer({ groupId: `smoke-${randomUUID()}`, ...consumerOptions });
    try {
      await producer.connect();
      await producer.send({ topic, messages: [{ key: 'k', value: 'hello kafka' }] });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const [message] = await consume(consumer, 1);
      expect(message?.key?.toString()).toBe('k');
      expect(message?.value?.toString()).toBe('hello kafka');
    } finally {
      await Promise.all([producer.disconnect(), consumer.disconnect()]);
    }
  });
});

describe('a broker of its own', () => {
  const dir = mkdtempSync(join(tmpdir(), 'spool-kafka-'));
  let broker: KafkaBroker | undefined;
  afterAll(async () => {
    await broker?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps topics, messages and committed offsets across a clean stop and a kill', async () => {
    broker = await startKafkaBroker({ dir });
    expect(broker.brokers).toMatch(/^127\.0\.0\.1:\d+$/);
    const topic = 'survivor';
    const groupId = 'survivor-readers';
    let kafka = client(broker.brokers);

    const admin = kafka.admin();
    await admin.connect();
    expect(await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }], waitForLeaders: true })).toBe(true);
    await admin.disconnect();
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: ['a', 'b', 'c'].map((value) => ({ value, partition: 0 })) });
    await producer.disconnect();

    const consumer = kafka.consumer({ groupId, ...consumerOptions });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const first = await consume(consumer, 3, { autoCommit: false });
    expect(first.map((m) => m.value?.toString())).toEqual(['a', 'b', 'c']);
    await consumer.commitOffsets([{ topic, partition: 0, offset: '3' }]);
    await consumer.disconnect();
    expect(await committedOffsets(kafka, groupId, topic)).toEqual(['3', '-1']);

    const address = broker.brokers;
    await broker.stop();
    await expect(topics(client(address, 0))).rejects.toThrow();
    await broker.start();
    expect(broker.brokers).toBe(address);
    kafka = client(broker.brokers);
    expect(await topics(kafka)).toContain(topic);
    expect(await committedOffsets(kafka, groupId, topic)).toEqual(['3', '-1']);

    // The group resumes after its committed offset: only the new message arrives.
    const again = kafka.producer();
    await again.connect();
    await again.send({ topic, acks: -1, messages: [{ value: 'd', partition: 0 }] });
    await again.disconnect();
    const resumed = kafka.consumer({ groupId, ...consumerOptions });
    await resumed.connect();
    await resumed.subscribe({ topic, fromBeginning: true });
    expect((await consume(resumed, 1, { autoCommit: false })).map((m) => m.value?.toString())).toEqual(['d']);
    await resumed.commitOffsets([{ topic, partition: 0, offset: '4' }]);
    await resumed.disconnect();
    expect(await committedOffsets(kafka, groupId, topic)).toEqual(['4', '-1']);

    await broker.kill();
    await broker.start();
    kafka = client(broker.brokers);
    expect(await topics(kafka)).toContain(topic);
    expect(await committedOffsets(kafka, groupId, topic)).toEqual(['4', '-1']);
    const admin2 = kafka.admin();
    await admin2.connect();
    const ends = await admin2.fetchTopicOffsets(topic);
    await admin2.disconnect();
    expect(ends.find((p) => p.partition === 0)?.high).toBe('4');
  }, 180_000);
});
