import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { KafkaMessageLog } from '../src/message-log/kafka-message-log.js';
import { quietKafkajsNegativeTimeouts } from '../src/message-log/kafkajs-timer-warning.js';

// A real Apache Kafka broker on 127.0.0.1, started by the test setup (or KAFKA_BROKERS).
const brokers = inject('kafkaBrokers').split(',');

/** Warnings the process emits while `run` runs, and a moment after (they are emitted on the next tick). */
async function warningsDuring(run: () => Promise<void>): Promise<Error[]> {
  const seen: Error[] = [];
  const listener = (warning: Error) => seen.push(warning);
  process.on('warning', listener);
  try {
    await run();
    await new Promise((resolve) => setTimeout(resolve, 50));
  } finally {
    process.off('warning', listener);
  }
  return seen;
}

describe("kafkajs's negative timeout warning", () => {
  afterEach(() => quietKafkajsNegativeTimeouts()());

  // Each test file runs in a process of its own, and Node warns of a negative timeout once per
  // process: without the filter, this process's first connection to the broker prints it.
  it('is not printed when a Kafka message log connects, publishes and closes', async () => {
    const warnings = await warningsDuring(async () => {
      const log = new KafkaMessageLog({ brokers, clientId: 'timer-warning', sessionTimeoutMs: 6_000 }, pino({ level: 'error' }));
      const topic = `warnings.${randomUUID().slice(0, 8)}`;
      await log.ensureTopics([{ topic, partitions: 1 }]);
      await log.publish(topic, [{ key: 'k', value: 'v' }]);
      await log.close();
    });
    expect(warnings.map((warning) => warning.name)).not.toContain('TimeoutNegativeWarning');
  }, 60_000);

  it('passes every other warning on, the same kind from elsewhere included', async () => {
    quietKafkajsNegativeTimeouts();
    const warnings = await warningsDuring(async () => {
      process.emitWarning('-5 is a negative number.', 'TimeoutNegativeWarning');
      process.emitWarning('something else', { type: 'SpoolTestWarning', code: 'SPOOL_TEST' });
    });
    expect(warnings.map((warning) => [warning.name, warning.message])).toEqual([
      ['TimeoutNegativeWarning', '-5 is a negative number.'],
      ['SpoolTestWarning', 'something else'],
    ]);
  });

  it('is installed once, and removed by the function it returns', () => {
    const original = process.emitWarning;
    const remove = quietKafkajsNegativeTimeouts();
    expect(quietKafkajsNegativeTimeouts()).toBe(remove);
    expect(process.emitWarning).not.toBe(original);
    remove();
    expect(process.emitWarning).toBe(original);
  });
});
