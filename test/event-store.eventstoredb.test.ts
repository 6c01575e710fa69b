import type { ResolvedEvent } from '@eventstore/db-client';
import { describe, expect, it } from 'vitest';
import { lineOutcomeEventId } from '../src/domain/line-outcome.js';
import { EventStoreDbEventStore, toRecordedEvent } from '../src/event-store/eventstoredb-event-store.js';
import { eventStoreContract } from './support/event-store-contract.js';

/**
 * The same contract against EventStoreDB/KurrentDB: a server named by EVENTSTORE_URL, or one that
 * testcontainers starts where a Docker engine is available. Neither here: the suite says so.
 */
const url = process.env.EVENTSTORE_URL;
const docker = url ? false : await dockerAvailable();

if (url) {
  eventStoreContract(`EventStoreDB at ${url}`, async () => new EventStoreDbEventStore(url));
} else if (docker) {
  const { GenericContainer, Wait } = await import('testcontainers');
  let container: Awaited<ReturnType<InstanceType<typeof GenericContainer>['start']>> | undefined;
  eventStoreContract(
    'EventStoreDB in a container',
    async () => {
      container = await new GenericContainer(process.env.EVENTSTORE_IMAGE ?? 'eventstore/eventstore:24.10')
        .withEnvironment({ EVENTSTORE_INSECURE: 'true', EVENTSTORE_RUN_PROJECTIONS: 'None', EVENTSTORE_MEM_DB: 'true' })
        .withExposedPorts(2113)
        .withWaitStrategy(Wait.forHttp('/health/live', 2113).forStatusCode(204))
        .start();
      return new EventStoreDbEventStore(`esdb://${container.getHost()}:${container.getMappedPort(2113)}?tls=false`);
    },
    async () => {
      await container?.stop();
    },
  );
} else {
  const reason = 'EVENTSTORE_URL is not set and no Docker engine is available';
  process.stderr.write(`\n[event store contract] EventStoreDB suite SKIPPED: ${reason}.\n`);
  describe('event store contract: EventStoreDB', () => {
    it.skip(`SKIPPED: ${reason} (set EVENTSTORE_URL=esdb://host:2113?tls=false to run it)`, () => undefined);
  });
}

async function dockerAvailable(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

/** The adapter's own translation of what the client reads, which needs no server. */
describe('the EventStoreDB adapter, what it makes of an event the client read', () => {
  const resolved = (event: Record<string, unknown> | undefined) => ({ event }) as unknown as ResolvedEvent;
  const read = {
    streamId: 'batchlines-batch_x-0',
    id: lineOutcomeEventId('batch_x', 7),
    revision: 3n,
    type: 'LineCompleted',
    data: { line: 7 },
    metadata: { schemaVersion: 1, correlationId: 'batch-runner' },
    isJson: true,
    created: new Date(1_795_000_000_123),
    position: { commit: 42n, prepare: 41n },
  };

  it('keeps id, stream, revision, data, metadata and position, and the creation time in milliseconds', () => {
    expect(toRecordedEvent(resolved(read))).toEqual({
      id: read.id,
      type: 'LineCompleted',
      data: { line: 7 },
      metadata: { schemaVersion: 1, correlationId: 'batch-runner' },
      streamName: 'batchlines-batch_x-0',
      revision: 3n,
      position: { commit: 42n, prepare: 41n },
      recordedAt: 1_795_000_000_123,
    });
  });

  it('carries nothing the port has no place for: binary events, events without a position, a link to nothing', () => {
    expect(toRecordedEvent(resolved({ ...read, isJson: false }))).toBeUndefined();
    expect(toRecordedEvent(resolved({ ...read, position: undefined }))).toBeUndefined();
    expect(toRecordedEvent(resolved(undefined))).toBeUndefined();
  });
});
