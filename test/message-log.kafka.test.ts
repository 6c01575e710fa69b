import { randomUUID } from 'node:crypto';
import { logLevel } from 'kafkajs';
import { pino } from 'pino';
import { describe, expect, inject, it } from 'vitest';
import { KafkaMessageLog } from '../src/message-log/kafka-message-log.js';
import { kafkaClient } from './support/kafka-broker.js';
import { messageLogContract } from './support/message-log-contract.js';

// A real Apache Kafka broker on 127.0.0.1, started by the test setup (or KAFKA_BROKERS).
const brokers = inject('kafkaBrokers').split(',');
const open = () => new KafkaMessageLog({ brokers, clientId: 'contract', sessionTimeoutMs: 6_000 }, pino({ level: 'error' }));

messageLogContract('Kafka', async () => open());

describe('the Kafka message log', () => {
  it('creates missing topics with the partitions asked for, and leaves existing ones as they are', async () => {
    const log = open();
    const fresh = `topics.${randomUUID().slice(0, 8)}`;
    const existing = `topics.${randomUUID().slice(0, 8)}`;
    await log.ensureTopics([{ topic: existing, partitions: 2 }]);
    await log.ensureTopics([
      { topic: existing, partitions: 5 },
      { topic: fresh, partitions: 3 },
    ]);
    await log.close();
    const admin = kafkaClient({ brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [existing, fresh] });
      const partitions = Object.fromEntries(topics.map((topic) => [topic.name, topic.partitions.length]));
      expect(partitions).toEqual({ [existing]: 2, [fresh]: 3 });
    } finally {
      await admin.disconnect();
    }
  });
});
