import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EventSchemas, SchemaCheckedEventStore } from '../src/event-store/event-schemas.js';
import type { EventBatchHandler, EventStore } from '../src/event-store/event-store.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { dumpReadModels, openReadModelStore } from '../projections/read-model-store.js';
import { Projector } from '../projections/projector.js';
import { ALL_PROJECTIONS } from '../projections/all-projections.js';
import { historyProjection } from '../projections/history-projection.js';
import { ManualClock, startTestService, tempDir, uploadFile, waitUntilReady } from './support/service.js';

const removeReadModels = (dataDir: string) => {
  for (const suffix of ['', '-wal', '-shm']) rmSync(join(dataDir, `read-models.sqlite${suffix}`), { force: true });
};

describe('projections', () => {
  it('resume from their checkpoint on restart, and rebuild identically from the log', async () => {
    const dataDir = tempDir('rebuild');
    const clock = new ManualClock();
    let service = await startTestService({ dataDir, clock });
    const ids: string[] = [];
    for (let index = 0; index < 5; index++) {
      const purpose = index === 4 ? 'user_data' : 'batch';
      const fields: Record<string, string> = index === 4 ? { 'expires_after[anchor]': 'created_at', 'expires_after[seconds]': '3600' } : {};
      ids.push(((await (await uploadFile(service.url, { purpose, content: `line ${index}\n`, fields })).json()) as { id: string }).id);
    }
    expect((await fetch(`${service.url}/v1/files/${ids[1]}`, { method: 'DELETE' })).status).toBe(200);
    clock.advance(3601);
    expect(await service.sweeper.sweepOnce()).toBe(1);
    const log = await service.eventStore.readAll({ maxCount: 1000 });
    const logLength = log.length;
    expect(log.filter((event) => event.streamName.startsWith('file-')).map((event) => event.type).sort()).toEqual([
      'FileDeleted',
      'FileExpired',
      ...Array(5).fill('FileUploaded'),
    ]);
    const original = dumpReadModels(service.readModels);
    expect(original.files).toHaveLength(5);
    await service.close();

    // Restart: nothing is applied twice, and new events still arrive.
    service = await startTestService({ dataDir, clock });
    expect(service.projector.eventsApplied).toBe(0);
    expect(dumpReadModels(service.readModels)).toEqual(original);
    await uploadFile(service.url, { purpose: 'batch', content: 'after restart' });
    expect(service.projector.eventsApplied).toBe(1);
    const withOneMore = dumpReadModels(service.readModels);
    await service.close();

    // Delete the read models: they are rebuilt from the log, row for row.
    removeReadModels(dataDir);
    service = await startTestService({ dataDir, clock });
    expect(service.projector.eventsApplied).toBe(logLength + 1);
    expect(dumpReadModels(service.readModels)).toEqual(withOneMore);
    const listed = (await (await fetch(`${service.url}/v1/files?order=asc`)).json()) as { data: { id: string }[] };
    expect(listed.data.map((file) => file.id)).toEqual([ids[0], ids[2], ids[3], expect.any(String)]);
    await service.close();
  });

  it('keep /ready at 503 with the error envelope until they have caught up', async () => {
    const dataDir = tempDir('ready');
    const first = await startTestService({ dataDir });
    await uploadFile(first.url, { purpose: 'batch', content: 'x' });
    await first.close();
    removeReadModels(dataDir);

    // The real store, with its subscription held back until the test lets it go.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const inner = new SqliteEventStore(join(dataDir, 'events.sqlite'));
    const held: EventStore = Object.assign(Object.create(inner) as EventStore, {
      subscribeToAll: (options: Parameters<EventStore['subscribeToAll']>[0], handler: EventBatchHandler) =>
        inner.subscribeToAll(options, async (events) => {
          await gate;
          await handler(events);
        }),
    });
    const { startService } = await import('../src/service.js');
    const { loadConfig } = await import('../src/config.js');
    const { pino } = await import('pino');
    const service = await startService({
      config: loadConfig({ PORT: '0', DATA_DIR: dataDir, API_KEY: 'test-api-key-0123456789' }),
      logger: pino({ level: 'silent' }),
      eventStore: new SchemaCheckedEventStore(held, new EventSchemas()),
    });
    const notReady = await fetch(`${service.url}/ready`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({
      error: { message: 'Service is not ready: projections are catching up', type: 'service_unavailable', param: '', code: 'not_ready' },
    });
    expect((await fetch(`${service.url}/live`)).status).toBe(200);
    release();
    await waitUntilReady(service.url);
    const ready = (await (await fetch(`${service.url}/ready`)).json()) as Record<string, unknown>;
    expect(ready).toMatchObject({ status: 'ready', version: '0.1.0', event_store: 'embedded' });
    await service.close();
  });
});

describe('two processes on one read-model file', () => {
  // README allows processes on one host to share a DATA_DIR, and with it read-models.sqlite: each
  // process projects the whole log into it. Each Projector here has its own store handle and its
  // own connection to the file, as two processes would.
  it('apply every event once, whichever of them gets to it first', async () => {
    const dataDir = tempDir('shared-read-models');
    const service = await startTestService({ dataDir });
    for (let index = 0; index < 40; index++) await uploadFile(service.url, { purpose: 'batch', content: `line ${index}\n` });
    await service.close();
    const alone = projectInto(join(tempDir('alone'), 'read-models.sqlite'), [dataDir]);
    const expected = dumpReadModels((await alone)[0]!);

    const shared = join(tempDir('shared'), 'read-models.sqlite');
    const [first, second] = await projectInto(shared, [dataDir, dataDir]);
    expect(dumpReadModels(first!).history).toHaveLength(expected.history!.length);
    expect(dumpReadModels(first!)).toEqual(expected);
    expect(dumpReadModels(second!)).toEqual(expected);
  });

  it('a process of another release stops its projections rather than write a read model rebuilt at another version', async () => {
    const dataDir = tempDir('shared-releases');
    let service = await startTestService({ dataDir });
    for (let index = 0; index < 5; index++) await uploadFile(service.url, { purpose: 'batch', content: `line ${index}\n` });
    await service.close();
    const shared = join(tempDir('releases'), 'read-models.sqlite');
    const older = projectorOf(shared, dataDir);
    await older.projector.start();
    await older.projector.whenCaughtUp();
    // The next release changed the history index: its process rebuilds it in the shared file.
    const newer = projectorOf(shared, dataDir, ALL_PROJECTIONS.map((projection) => (projection === historyProjection ? { ...historyProjection, version: historyProjection.version + 1 } : projection)));
    await newer.projector.start();
    await newer.projector.whenCaughtUp();

    service = await startTestService({ dataDir });
    for (let index = 0; index < 3; index++) await uploadFile(service.url, { purpose: 'batch', content: `more ${index}\n` });
    await service.close();
    const head = (await newer.store.headPosition())!;
    await newer.projector.waitFor(head);
    for (const deadline = Date.now() + 10_000; older.projector.status().failed === undefined && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(older.projector.status().failed).toMatch(/read model history .* version 2, made by another process of another release; this one writes version 1/);
    // Every event once, applied by the release that made the table.
    const log = await newer.store.readAll({ maxCount: 1000 });
    expect(dumpReadModels(newer.db).history).toHaveLength(log.filter((event) => event.streamName.startsWith('file-')).length);
    for (const { projector, store } of [older, newer]) {
      await projector.stop();
      await store.close();
    }
  });
});

/** A Projector of the log in `dataDir` into the read-model file at `path`, over a connection and a log handle of its own (as another process's). */
function projectorOf(path: string, dataDir: string, projections = ALL_PROJECTIONS) {
  const quiet = { info: () => undefined, error: () => undefined };
  const db = openReadModelStore(path);
  const store = new SqliteEventStore(join(dataDir, 'events.sqlite'));
  return { db, store, projector: new Projector(store, db, projections, quiet) };
}

/** Starts one Projector per data directory given, all into the read-model file at `path`, and waits for all to catch up; returns their connections. */
async function projectInto(path: string, dataDirs: readonly string[]) {
  const running = dataDirs.map((dataDir) => projectorOf(path, dataDir));
  await Promise.all(running.map(({ projector }) => projector.start()));
  await Promise.all(running.map(({ projector }) => projector.whenCaughtUp()));
  for (const { projector, store } of running) {
    await projector.stop();
    await store.close();
  }
  return running.map(({ db }) => db);
}

describe('file expiry', () => {
  it('hides a file the moment it expires, then the sweeper records FileExpired and removes its content', async () => {
    const clock = new ManualClock();
    const service = await startTestService({ clock });
    const upload = async (purpose: string, fields: Record<string, string> = {}) =>
      ((await (await uploadFile(service.url, { purpose, content: 'data', fields })).json()) as { id: string; expires_at: number | null });
    const shortLived = await upload('user_data', { 'expires_after[anchor]': 'created_at', 'expires_after[seconds]': '3600' });
    const batch = await upload('batch');
    const forever = await upload('user_data');
    expect(forever.expires_at).toBeNull();

    clock.advance(3600);
    expect((await fetch(`${service.url}/v1/files/${shortLived.id}`)).status).toBe(404);
    expect((await fetch(`${service.url}/v1/files/${shortLived.id}/content`)).status).toBe(404);
    expect((await fetch(`${service.url}/v1/files/${shortLived.id}`, { method: 'DELETE' })).status).toBe(404);
    expect(await service.sweeper.sweepOnce()).toBe(1);
    const expired = (await service.eventStore.readAll({ maxCount: 100 })).filter((event) => event.type === 'FileExpired');
    expect(expired.map((event) => event.data)).toEqual([{ file_id: shortLived.id, expired_at: clock.seconds }]);
    expect(await service.blobStore.head(`files/${shortLived.id}`)).toBeUndefined();
    expect(await service.blobStore.head(`files/${batch.id}`)).toMatchObject({ size: 4 });

    clock.advance(30 * 86400);
    expect(await service.sweeper.sweepOnce()).toBe(1);
    expect(await service.sweeper.sweepOnce()).toBe(0);
    const listed = (await (await fetch(`${service.url}/v1/files`)).json()) as { data: { id: string }[] };
    expect(listed.data.map((file) => file.id)).toEqual([forever.id]);
    await service.close();
  });
});
