import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import Database from 'better-sqlite3';
import OpenAI, { toFile } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { filesProjection, FilesQueries } from '../projections/files-projection.js';
import { BlobReferences } from '../src/application/blob-references.js';
import { chunkPartBlobKey, fileBlobKey, workFileBlobKey } from '../src/domain/blob-keys.js';
import { batchStreamName, fileStreamName } from '../src/domain/stream-names.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { LocalBlobStore } from '../src/blob-store/local-blob-store.js';
import { BlobDebrisSweeper } from '../processors/watches/blob-debris-sweeper.js';
import { chatLine, createBatch, fileLines, waitForStatus } from './support/batch-helpers.js';
import { listKeys } from './support/blob-store-contract.js';
import { type WholeService, s3Env, startTestService, tempDir } from './support/service.js';

const HOURS_AGO_2 = () => new Date(Date.now() - 2 * 3600_000);

async function until(condition: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** An input file, a batch over it on the built-in model, and the batch's output file. */
async function runSmallBatch(client: OpenAI) {
  const lines = [0, 1].map((index) => {
    const line = JSON.parse(chatLine(`line-${index}`, `hello ${index}`)) as { body: { model: string } };
    line.body.model = 'spool-tiny';
    return JSON.stringify(line);
  });
  const inputContent = lines.join('\n') + '\n';
  const input = await client.files.create({ file: await toFile(Buffer.from(inputContent), 'input.jsonl'), purpose: 'batch' });
  const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-demo' });
  const done = await waitForStatus(client, batch.id, ['completed']);
  return { input, inputContent, outputFileId: done.output_file_id! };
}

describe('debris in the local blob store', () => {
  let service: WholeService | undefined;
  afterEach(async () => {
    await service?.close();
    service = undefined;
  });

  it('is swept at start: partials and orphans older than the grace age go; fresh ones and every blob an event names stay', async () => {
    const dataDir = tempDir('debris');
    service = await startTestService({ dataDir });
    let client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const { input, inputContent, outputFileId } = await runSmallBatch(client);
    const kept = await client.files.create({ file: await toFile(Buffer.from('kept'), 'notes.txt'), purpose: 'user_data' });
    const deleted = await client.files.create({ file: await toFile(Buffer.from('deleted'), 'gone.txt'), purpose: 'user_data' });
    await client.files.delete(deleted.id);
    await service.close();
    service = undefined;

    const files = join(dataDir, 'blobs', 'files');
    const referenced = readdirSync(files);
    expect(referenced.sort()).toEqual([input.id, outputFileId, kept.id].sort());
    // As if the process died between recording FileDeleted and removing the content.
    writeFileSync(join(files, deleted.id), 'deleted');
    utimesSync(join(files, deleted.id), HOURS_AGO_2(), HOURS_AGO_2());
    // Every referenced blob is as old as the debris: only the event log tells them apart.
    for (const name of referenced) utimesSync(join(files, name), HOURS_AGO_2(), HOURS_AGO_2());
    const debris = { stalePartial: '.0b1c.partial', freshPartial: '.9f8e.partial', staleOrphan: 'file-orphan0stale', freshOrphan: 'file-orphan0fresh' };
    for (const name of Object.values(debris)) writeFileSync(join(files, name), 'half of something');
    for (const name of [debris.stalePartial, debris.staleOrphan]) utimesSync(join(files, name), HOURS_AGO_2(), HOURS_AGO_2());
    // The read models are rebuilt from the log during this start.
    for (const name of readdirSync(dataDir)) if (name.startsWith('read-models.sqlite')) rmSync(join(dataDir, name));

    service = await startTestService({ dataDir });
    await until(() => [debris.stalePartial, debris.staleOrphan, deleted.id].every((name) => !existsSync(join(files, name))), 'stale debris swept at start');
    expect(readdirSync(files).sort()).toEqual([...referenced, debris.freshPartial, debris.freshOrphan].sort());

    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect(await (await client.files.content(input.id)).text()).toBe(inputContent);
    expect(await (await client.files.content(kept.id)).text()).toBe('kept');
    expect((await fileLines(client, outputFileId)).map((line) => line.custom_id).sort()).toEqual(['line-0', 'line-1']);

    // A sweep now finds nothing more to remove.
    expect(await service.debrisSweeper!.sweepOnce()).toEqual({ abandonedWrites: 0, orphans: 0, leftovers: 0 });
  });
});

describe('a sweep of a store that holds mostly content', () => {
  it('asks the age only of the blobs no event keeps: the content it leaves costs it no stat each', async () => {
    const dataDir = tempDir('debris-ages');
    const service = await startTestService({ dataDir });
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const uploaded: string[] = [];
    for (let index = 0; index < 12; index++) uploaded.push((await client.files.create({ file: await toFile(Buffer.from(`content ${index}`), `f${index}.txt`), purpose: 'user_data' })).id);
    await service.close();
    const files = join(dataDir, 'blobs', 'files');
    for (const id of uploaded) utimesSync(join(files, id), HOURS_AGO_2(), HOURS_AGO_2());
    writeFileSync(join(files, 'file-orphan0stale'), 'half of something');
    utimesSync(join(files, 'file-orphan0stale'), HOURS_AGO_2(), HOURS_AGO_2());
    writeFileSync(join(files, 'file-orphan0fresh'), 'half of something');

    const asked: string[] = [];
    // Every age the store is asked for, whichever way: one object's (head) or a listing's (entries).
    class AgesCounted extends LocalBlobStore {
      override head(key: string) {
        asked.push(key);
        return super.head(key);
      }
      override async *entries(prefix: string) {
        for await (const entry of super.entries(prefix)) {
          asked.push(entry.key);
          yield entry;
        }
      }
    }
    const eventStore = new SqliteEventStore(join(dataDir, 'events.sqlite'));
    const readModels = new Database(join(dataDir, 'read-models.sqlite'));
    try {
      const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
      const sweeper = new BlobDebrisSweeper(
        { blobStore: new AgesCounted(join(dataDir, 'blobs')), references: new BlobReferences({ eventStore, filesQueries: new FilesQueries(readModels) }), log: quiet },
        { intervalMs: 3_600_000, graceMs: 3_600_000 },
      );
      expect(await sweeper.sweepOnce()).toEqual({ abandonedWrites: 0, orphans: 1, leftovers: 0 });
      // The twelve files' content, as old as the stale orphan, is known by the log alone.
      expect(asked.sort()).toEqual(['files/file-orphan0fresh', 'files/file-orphan0stale']);
      expect(readdirSync(files).sort()).toEqual([...uploaded, 'file-orphan0fresh'].sort());
    } finally {
      readModels.close();
      await eventStore.close();
    }
  });
});

describe('what the event log says of a blob', () => {
  it('is read from the log when the read models have not seen the file yet', async () => {
    const directory = tempDir('references');
    const eventStore = new SqliteEventStore(join(directory, 'events.sqlite'));
    const readModels = new Database(join(directory, 'read-models.sqlite'));
    filesProjection.create(readModels);
    try {
      await eventStore.appendToStream(fileStreamName('file-logonly'), [
        {
          id: randomUUID(),
          type: 'FileUploaded',
          data: { file_id: 'file-logonly', filename: 'a.jsonl', purpose: 'batch', bytes: 1, sha256: 'a'.repeat(64), blob_key: fileBlobKey('file-logonly'), created_at: 1, expires_at: null },
          metadata: { schemaVersion: 1 },
        },
      ], { expectedRevision: 'no_stream' });
      const references = new BlobReferences({ eventStore, filesQueries: new FilesQueries(readModels) });
      expect(await references.standingOf(fileBlobKey('file-logonly'))).toBe('content');
      expect(await references.standingOf(fileBlobKey('file-nowhere'))).toBe('unrecorded');
      expect(await references.standingOf('elsewhere/thing')).toBe('foreign');
      await eventStore.appendToStream(fileStreamName('file-logonly'), [{ id: randomUUID(), type: 'FileDeleted', data: { file_id: 'file-logonly', deleted_at: 2 }, metadata: { schemaVersion: 1 } }]);
      expect(await references.standingOf(fileBlobKey('file-logonly'))).toBe('removed');
    } finally {
      readModels.close();
      await eventStore.close();
    }
  });
});

describe("a batch's work file and chunk parts", () => {
  it('stand while its batch runs, are to go once the batch is over, and are debris when no event recorded them', async () => {
    const directory = tempDir('work-file-references');
    const eventStore = new SqliteEventStore(join(directory, 'events.sqlite'));
    const readModels = new Database(join(directory, 'read-models.sqlite'));
    filesProjection.create(readModels);
    const event = (type: string, data: Record<string, unknown>) => ({ id: randomUUID(), type, data: { batch_id: 'batch_w', ...data }, metadata: { schemaVersion: 1 } });
    try {
      const references = new BlobReferences({ eventStore, filesQueries: new FilesQueries(readModels) });
      const key = workFileBlobKey('batch_w');
      const part = chunkPartBlobKey('batch_w', 0, 'output');
      // Stored, then the process died before the validation was recorded.
      expect(await references.standingOf(key)).toBe('unrecorded');
      expect(await references.standingOf(part)).toBe('unrecorded');
      await eventStore.appendToStream(batchStreamName('batch_w'), [
        event('BatchCreated', { input_file_id: 'file-in', endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job', model: 'm', price_1m_tokens: 1, metadata: null, output_expires_after: null, created_at: 1, expires_at: null }),
        event('BatchValidated', { total: 1, input_blob_key: 'files/file-in', work_blob_key: key, chunks: [{ index: 0, first_line: 1, lines: 1, start: 0, end: 10 }], in_progress_at: 2 }),
      ], { expectedRevision: 'no_stream' });
      expect(await references.standingOf(key)).toBe('content');
      expect(await references.standingOf(part)).toBe('content');
      expect(await references.standingOf(chunkPartBlobKey('batch_w', 0, 'error'))).toBe('content');
      // Another batch's key is not this one's.
      expect(await references.standingOf(workFileBlobKey('batch_other'))).toBe('unrecorded');
      expect(await references.standingOf(chunkPartBlobKey('batch_other', 0, 'output'))).toBe('unrecorded');
      // A key of that shape Spool never writes.
      expect(await references.standingOf('batches/batch_w/parts/notes.txt')).toBe('foreign');
      await eventStore.appendToStream(batchStreamName('batch_w'), [event('BatchFinalizing', { finalizing_at: 3 }), event('BatchCompleted', { output_file_id: 'file-out', error_file_id: null, completed_at: 4 })]);
      expect(await references.standingOf(key)).toBe('removed');
      expect(await references.standingOf(part)).toBe('removed');
    } finally {
      readModels.close();
      await eventStore.close();
    }
  });
});

describe('debris in S3 (s3rver)', () => {
  let service: WholeService | undefined;
  afterEach(async () => {
    await service?.close();
    service = undefined;
  });

  it('removes orphan objects older than the grace age and keeps fresh ones and every object an event names', async () => {
    const prefix = `debris-${Date.now()}`;
    service = await startTestService({ env: { ...s3Env(prefix), BLOB_DEBRIS_GRACE_SECONDS: '2' } });
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const { input, inputContent, outputFileId } = await runSmallBatch(client);
    await service.blobStore.put('files/file-orphan0stale', Readable.from([Buffer.from('stored, then the process died')]));
    await new Promise((resolve) => setTimeout(resolve, 2500));
    await service.blobStore.put('files/file-orphan0fresh', Readable.from([Buffer.from('an upload about to be recorded')]));

    const swept = await service.debrisSweeper!.sweepOnce();
    expect(swept).toMatchObject({ orphans: 1, leftovers: 0 });
    expect(await listKeys(service.blobStore, 'files/')).toEqual([`files/${input.id}`, `files/${outputFileId}`, 'files/file-orphan0fresh'].sort());
    expect(await (await client.files.content(input.id)).text()).toBe(inputContent);
    expect(await fileLines(client, outputFileId)).toHaveLength(2);
  });
});
