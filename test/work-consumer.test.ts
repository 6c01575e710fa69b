import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ALL_PROJECTIONS } from '../projections/all-projections.js';
import { Projector } from '../projections/projector.js';
import { openReadModelStore } from '../projections/read-model-store.js';
import { WorkConsumer } from '../processors/messaging/work-consumer.js';
import { positionToString } from '../src/event-store/event-store.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { EmbeddedMessageLog } from '../src/message-log/embedded-message-log.js';
import { MessageSchemas, WORK_TOPICS } from '../src/messages/topics.js';
import type { WorkMessage } from '../src/messages/work-message.js';
import { tempDir } from './support/service.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** An embedded log in `directory` and a projector of every read model over it, closed after the test. */
async function projectedLog(directory: string, options: ConstructorParameters<typeof SqliteEventStore>[1] = {}): Promise<{ eventStore: SqliteEventStore; projector: Projector }> {
  const eventStore = new SqliteEventStore(join(directory, 'events.sqlite'), options);
  closers.push(() => eventStore.close());
  const readModels = openReadModelStore(join(directory, 'read-models.sqlite'));
  closers.push(() => void readModels.close());
  const projector = new Projector(eventStore, readModels, ALL_PROJECTIONS, pino({ level: 'silent' }));
  await projector.start();
  closers.push(() => projector.stop());
  return { eventStore, projector };
}

describe('a work consumer', () => {
  it("waits for its read models to hold another process's event no longer than a read: the wait wakes the log's subscription", async () => {
    const directory = tempDir('work-consumer-wake');
    // Polls a minute apart, other processes' commits not listened for: the projector learns of the other connection's event only by waking.
    const { eventStore, projector } = await projectedLog(directory, { pollIntervalMs: 60_000, watchOtherProcesses: false });
    const otherProcess = new SqliteEventStore(join(directory, 'events.sqlite'), { pollIntervalMs: 60_000, watchOtherProcesses: false });
    closers.push(() => otherProcess.close());
    await projector.waitFor((await eventStore.appendToStream('notes-1', [{ id: randomUUID(), type: 'Noted', data: {}, metadata: { schemaVersion: 1 } }])).position, 5_000);

    const { position } = await otherProcess.appendToStream('notes-2', [{ id: randomUUID(), type: 'Noted', data: {}, metadata: { schemaVersion: 1 } }]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(projector.reached(position)).toBe(false);
    // A work message naming it would ask so: resolved well inside 5 s, not after the minute's poll.
    await projector.waitFor(position, 5_000);
    expect(projector.reached(position)).toBe(true);
  });

  // The consumer would wait up to a minute for its read models to reach a position; this test
  // gives it 20 s in all, so a stale message must be recognised, not waited out.
  it('passes over a message from another log (a position past the head) without holding the messages behind it', { timeout: 20_000 }, async () => {
    const { eventStore, projector } = await projectedLog(tempDir('work-consumer'));
    const messageLog = new EmbeddedMessageLog();
    closers.push(() => messageLog.close());
    await messageLog.ensureTopics([{ topic: WORK_TOPICS.finalizer, partitions: 1 }]);

    await eventStore.appendToStream('notes-1', [{ id: randomUUID(), type: 'Noted', data: {}, metadata: { schemaVersion: 1 } }], { expectedRevision: 'any' });
    const head = (await eventStore.headPosition())!;
    const handled: string[] = [];
    const skipped: string[] = [];
    const note = (fields: object, message?: string) => void (message?.includes('past the end') && skipped.push(JSON.stringify(fields)));
    const log = { info: () => undefined, warn: () => undefined, error: note } as unknown as ConstructorParameters<typeof WorkConsumer>[0]['log'];
    const consumer = new WorkConsumer({
      kind: 'finalizer',
      messageLog,
      schemas: new MessageSchemas(),
      eventStore,
      projector,
      concurrency: 1,
      log,
      handle: async (message) => void handled.push('batch_id' in message ? message.batch_id : message.model),
    });
    await consumer.start();
    closers.push(() => consumer.stop());

    const schemas = new MessageSchemas();
    const message = (batchId: string, position: string): { key: string; value: string } => {
      const work: WorkMessage = { kind: 'finalize-batch', batch_id: batchId, position, event_id: randomUUID() };
      return { key: 'same-partition', value: schemas.encodeWork(work) };
    };
    // Left by a deployment whose log went further than this one's, then this log's own.
    const beyond = positionToString({ commit: head.commit + 1_000n, prepare: head.prepare + 1_000n });
    await messageLog.publish(WORK_TOPICS.finalizer, [message('batch_elsewhere', beyond), message('batch_here', positionToString(head))]);

    while (!handled.includes('batch_here')) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(handled).toEqual(['batch_here']);
    expect(skipped).toHaveLength(1);
    expect(skipped[0]).toContain(beyond);
    expect(consumer.handled).toBe(1);
  });
});
