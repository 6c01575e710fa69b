import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { type BatchEvent, type BatchFacts, batchDecider } from '../src/domain/batch.js';
import { decideFile, initialFileState } from '../src/domain/file.js';
import { EventSchemaError, EventSchemas, SchemaCheckedEventStore } from '../src/event-store/event-schemas.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { schemasDir } from '../src/platform/package-root.js';
import { tempDir } from './support/service.js';

describe('event schemas', () => {
  const schemas = new EventSchemas();

  it('has one schema per file in schemas/events, each compiling under strict ajv', () => {
    const files = readdirSync(join(schemasDir, 'events')).filter((name) => name.endsWith('.json'));
    expect(files.length).toBeGreaterThan(0);
    expect(schemas.eventTypes.sort()).toEqual(files.map((name) => name.replace(/\.json$/, '')).sort());
  });

  it('accepts the events the domain decides', () => {
    const decided = decideFile(
      {
        type: 'RegisterFile',
        file: { fileId: 'file-1', filename: 'a.jsonl', purpose: 'batch', bytes: 1, sha256: 'f'.repeat(64), blobKey: 'files/file-1', createdAt: 1, expiresAt: null },
      },
      initialFileState,
    );
    expect(E.isRight(decided)).toBe(true);
    if (E.isRight(decided)) {
      for (const event of decided.right) {
        expect(() => schemas.check({ id: randomUUID(), type: event.type, data: event.data, metadata: { schemaVersion: 1 } })).not.toThrow();
      }
    }
  });

  it('accepts the deadline-risk event the batch decides, and refuses one without its estimate', () => {
    const facts: BatchFacts = {
      batch_id: 'batch_1', input_file_id: 'file-1', endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job', model: 'm',
      price_1m_tokens: 1, metadata: null, output_expires_after: null, created_at: 100, expires_at: 200,
    };
    const history: BatchEvent[] = [
      { type: 'BatchCreated', data: facts },
      { type: 'BatchValidated', data: { batch_id: 'batch_1', total: 10, input_blob_key: 'files/file-1', chunks: [{ index: 0, first_line: 1, lines: 10, start: 0, end: 10 }], in_progress_at: 110 } },
    ];
    const state = history.reduce(batchDecider.evolve, batchDecider.initialState);
    const decided = batchDecider.decide({ type: 'FlagDeadlineRisk', at: 150, estimated_completion_at: 350, lines_done: 2, lines_total: 10, lines_per_second: 0.05 }, state);
    expect(E.isRight(decided) && decided.right.map((event) => event.type)).toEqual(['BatchDeadlineAtRisk']);
    for (const event of E.isRight(decided) ? decided.right : []) {
      const data = event.data as unknown as Record<string, unknown>;
      expect(() => schemas.check({ id: randomUUID(), type: event.type, data, metadata: { schemaVersion: 1 } })).not.toThrow();
      const { estimated_completion_at: _dropped, ...partial } = data;
      expect(() => schemas.check({ id: randomUUID(), type: event.type, data: partial, metadata: { schemaVersion: 1 } })).toThrow(/estimated_completion_at/);
    }
  });

  it('refuses an append whose event breaks its schema, and writes nothing', async () => {
    const inner = new SqliteEventStore(join(tempDir('schemas'), 'events.sqlite'));
    const store = new SchemaCheckedEventStore(inner, schemas);
    const good = { id: randomUUID(), type: 'FileDeleted', data: { file_id: 'file-1', deleted_at: 5 }, metadata: { schemaVersion: 1 } };
    const bad = { id: randomUUID(), type: 'FileDeleted', data: { file_id: 'file-1', deleted_at: 'yesterday' }, metadata: { schemaVersion: 1 } };
    const unknown = { id: randomUUID(), type: 'NoSuchEvent', data: {}, metadata: { schemaVersion: 1 } };
    await expect(store.appendToStream('file-file-1', [good, bad])).rejects.toBeInstanceOf(EventSchemaError);
    await expect(store.appendToStream('file-file-1', [good, bad])).rejects.toThrow(/deleted_at must be integer/);
    await expect(store.appendToStream('file-file-1', [unknown])).rejects.toThrow(/no schema for this event type/);
    expect(await store.readAll({ maxCount: 10 })).toEqual([]);
    await store.appendToStream('file-file-1', [good]);
    expect((await store.readAll({ maxCount: 10 })).map((event) => event.type)).toEqual(['FileDeleted']);
    await store.close();
  });
});
