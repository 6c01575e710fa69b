#!/usr/bin/env node
// A downstream consumer of Spool's public batch-events topic (schemas/messages/batch-event.v1.json).
//
//   KAFKA_BROKERS=127.0.0.1:9092 node deploy/examples/batch-events-consumer.mjs [--group NAME] [--exit-when-idle SECONDS]
//
// Prints one JSON line per batch state change, in order for each batch. Delivery is at least once,
// so it drops any message whose event it has already seen: the revision of a batch's stream
// grows by one with each change, and a message at or below the last revision seen is a repeat.
// Without --group it reads the topic from the beginning under a fresh consumer group.
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';

const { values } = parseArgs({ options: { group: { type: 'string' }, 'exit-when-idle': { type: 'string' } } });
const brokers = (process.env.KAFKA_BROKERS ?? '').split(',').filter(Boolean);
if (brokers.length === 0) {
  process.stderr.write('set KAFKA_BROKERS to host:port[,host:port...]\n');
  process.exit(2);
}

const kafka = new Kafka({ clientId: 'batch-events-example', brokers, logLevel: logLevel.ERROR });
const consumer = kafka.consumer({ groupId: values.group ?? `batch-events-example-${randomUUID()}` });
/** batch id -> last revision printed. Keep this in your own store to survive restarts. */
const lastRevision = new Map();
let lastMessageAt = Date.now();

await consumer.connect();
await consumer.subscribe({ topics: ['batch-events'], fromBeginning: true });
await consumer.run({
  eachMessage: async ({ message }) => {
    lastMessageAt = Date.now();
    let event;
    try {
      event = JSON.parse(message.value.toString());
    } catch {
      process.stderr.write(`skipping a message that is not JSON at offset ${message.offset}\n`);
      return;
    }
    const seen = lastRevision.get(event.batch_id) ?? -1;
    if (event.revision <= seen) return; // a repeat: already printed
    lastRevision.set(event.batch_id, event.revision);
    process.stdout.write(
      `${JSON.stringify({ batch_id: event.batch_id, revision: event.revision, event_type: event.event_type, status: event.status, event_id: event.event_id, recorded_at: event.recorded_at })}\n`,
    );
  },
});

const stop = async () => {
  await consumer.disconnect();
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
const idleSeconds = Number(values['exit-when-idle'] ?? 0);
if (idleSeconds > 0) {
  setInterval(() => {
    if (Date.now() - lastMessageAt > idleSeconds * 1000) void stop();
  }, 250);
}
