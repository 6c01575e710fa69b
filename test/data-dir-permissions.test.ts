import { chmodSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteRelayCheckpoint } from '../processors/messaging/event-relay.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { chatLine, createBatch, fileLines, waitForStatus } from './support/batch-helpers.js';
import { type WholeService, startTestService, tempDir } from './support/service.js';

/** Every directory and file under root, with its permission bits, e.g. { 'blobs/files': '700' }. */
function modesUnder(root: string): Record<string, string> {
  const modes: Record<string, string> = { '.': (statSync(root).mode & 0o777).toString(8) };
  for (const entry of readdirSync(root, { recursive: true }).map(String)) modes[entry] = (statSync(join(root, entry)).mode & 0o777).toString(8);
  return modes;
}

describe('files Spool writes under DATA_DIR', () => {
  let service: WholeService;
  let dataDir: string;

  beforeAll(async () => {
    // A DATA_DIR that does not exist yet: Spool creates it and everything in it.
    dataDir = join(tempDir('private'), 'data');
    service = await startTestService({ dataDir, env: { BATCH_CHUNK_LINES: '2' } });
  });
  afterAll(async () => {
    await service?.close();
  });

  it('are readable by their owner only: directories 0700, files 0600, SQLite side files included', async () => {
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const lines = Array.from({ length: 3 }, (_, index) => JSON.parse(chatLine(`line-${index}`, `hello ${index}`)) as Record<string, any>);
    for (const line of lines) line.body.model = 'spool-tiny';
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.map((line) => JSON.stringify(line)).join('\n') + '\n'), 'input.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-demo' });
    const done = await waitForStatus(client, batch.id, ['completed']);
    expect(await fileLines(client, done.output_file_id)).toHaveLength(3);

    const modes = modesUnder(dataDir);
    // What the run wrote, so the check below covers each kind of file.
    expect(Object.keys(modes)).toEqual(
      expect.arrayContaining(['events.sqlite', 'events.sqlite-wal', 'events.sqlite-shm', 'read-models.sqlite', 'read-models.sqlite-wal', `blobs/files/${input.id}`, `blobs/files/${done.output_file_id}`, 'checkpoints/spool-tiny/model.safetensors']),
    );
    const loose = Object.entries(modes).filter(([path, mode]) => mode !== (statSync(join(dataDir, path)).isDirectory() ? '700' : '600'));
    expect(loose).toEqual([]);
  });
});

describe('the relay checkpoint file', () => {
  it('is private too, with its SQLite side files', () => {
    const directory = join(tempDir('relay'), 'data');
    mkdirSync(directory);
    const checkpoint = new SqliteRelayCheckpoint(join(directory, 'relay.sqlite'));
    try {
      checkpoint.save({ commit: 7n, prepare: 7n });
      const modes = modesUnder(directory);
      expect(Object.keys(modes).sort()).toEqual(['.', 'relay.sqlite', 'relay.sqlite-shm', 'relay.sqlite-wal']);
      expect(Object.entries(modes).filter(([path, mode]) => path !== '.' && mode !== '600')).toEqual([]);
    } finally {
      checkpoint.close();
    }
  });
});

describe('an event log written by an earlier version with a wider mode', () => {
  it('is narrowed to its owner when Spool opens it', async () => {
    const path = join(tempDir('earlier'), 'events.sqlite');
    const earlier = new Database(path);
    earlier.pragma('journal_mode = WAL');
    earlier.close();
    chmodSync(path, 0o644);
    const store = new SqliteEventStore(path);
    try {
      expect((statSync(path).mode & 0o777).toString(8)).toBe('600');
      expect((statSync(`${path}-wal`).mode & 0o777).toString(8)).toBe('600');
    } finally {
      await store.close();
    }
  });
});
