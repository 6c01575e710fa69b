import { inject } from 'vitest';
import { pino } from 'pino';
import { KafkaMessageLog } from '../src/message-log/kafka-message-log.js';
import { messageLogContract } from './support/message-log-contract.js';

// A real Apache Kafka broker on 127.0.0.1, started by the test setup (or KAFKA_BROKERS).
messageLogContract(
  'Kafka',
  async () => new KafkaMessageLog({ brokers: inject('kafkaBrokers').split(','), clientId: 'contract', sessionTimeoutMs: 6_000 }, pino({ level: 'error' })),
);
