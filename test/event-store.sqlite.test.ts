import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { eventStoreContract } from './support/event-store-contract.js';
import { tempDir } from './support/service.js';

eventStoreContract('embedded SQLite', async () => new SqliteEventStore(join(tempDir('events'), 'events.sqlite')));

describe('the embedded event store on disk', () => {
  it('keeps every appended event across a close and a reopen, positions and all', async () => {
    const path = join(tempDir('events-durable'), 'events.sqlite');
    const first = new SqliteEventStore(path);
    const appended = await first.appendToStream('durable-1', [
      { id: randomUUID(), type: 'Happened', data: { n: 1 }, metadata: { schemaVersion: 1 } },
      { id: randomUUID(), type: 'Happened', data: { n: 2 }, metadata: { schemaVersion: 1 } },
    ]);
    await first.close();
    const reopened = new SqliteEventStore(path);
    const events = await reopened.readAll({ maxCount: 10 });
    expect(events.map((event) => event.data)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(await reopened.headPosition()).toEqual(appended.position);
    await expect(reopened.appendToStream('durable-1', [{ id: randomUUID(), type: 'Happened', data: {}, metadata: { schemaVersion: 1 } }], { expectedRevision: 0n })).rejects.toMatchObject({ actual: 1n });
    await reopened.close();
  });
});
