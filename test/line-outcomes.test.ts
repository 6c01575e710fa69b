import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LineOutcomeLog } from '../src/application/line-outcomes.js';
import type { LineOutcome } from '../src/domain/line-outcome.js';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { tempDir } from './support/service.js';

const outcome = (line: number, by: string): LineOutcome => ({
  type: 'LineCompleted',
  data: { batch_id: 'batch_x', line, custom_id: `c${line}`, request_id: by, status_code: 200, body: {}, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } },
});

describe('line outcomes', () => {
  it('records each line once across two writers on one chunk, each remembering what it recorded before', async () => {
    const path = join(tempDir('outcomes'), 'events.sqlite');
    const storeA = new SqliteEventStore(path);
    const storeB = new SqliteEventStore(path);
    const a = new LineOutcomeLog(storeA);
    const b = new LineOutcomeLog(storeB);
    expect(await a.record('batch_x', 0, [outcome(1, 'a'), outcome(2, 'a')], 'test')).toBe(2);
    expect(await b.record('batch_x', 0, [outcome(2, 'b'), outcome(3, 'b')], 'test')).toBe(1);
    // a's memory of the chunk is behind b's append: it still drops line 3 and records line 4.
    expect(await a.record('batch_x', 0, [outcome(3, 'a'), outcome(4, 'a'), outcome(4, 'a')], 'test')).toBe(1);
    expect(await b.record('batch_x', 0, [outcome(1, 'b'), outcome(4, 'b')], 'test')).toBe(0);
    // Racing groups: one wins each line.
    const counts = await Promise.all([a.record('batch_x', 0, [5, 6, 7].map((line) => outcome(line, 'a')), 'test'), b.record('batch_x', 0, [6, 7, 8].map((line) => outcome(line, 'b')), 'test')]);
    expect(counts[0] + counts[1]).toBe(4);
    const lines = (await a.read('batch_x', 0)).map((event) => (event.data as { line: number }).line);
    expect(lines.sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect((await a.read('batch_x', 0)).find((event) => (event.data as { line: number }).line === 3)?.data).toMatchObject({ request_id: 'b' });
    await storeA.close();
    await storeB.close();
  });

  it('still records each line once after forgetting a chunk, and across more chunks than it remembers', async () => {
    const store = new SqliteEventStore(join(tempDir('outcomes-forget'), 'events.sqlite'));
    const log = new LineOutcomeLog(store);
    expect(await log.record('batch_x', 0, [outcome(1, 'a'), outcome(2, 'a')], 'test')).toBe(2);
    log.forget('batch_x', 0);
    expect(await log.record('batch_x', 0, [outcome(2, 'b'), outcome(3, 'b')], 'test')).toBe(1);
    // More chunks than are remembered: the first is read again, not appended to blindly.
    for (let chunk = 1; chunk <= 100; chunk++) await log.record('batch_x', chunk, [outcome(chunk * 10, 'a')], 'test');
    expect(await log.record('batch_x', 0, [outcome(1, 'c'), outcome(4, 'c')], 'test')).toBe(1);
    expect((await log.read('batch_x', 0)).map((event) => (event.data as { line: number }).line)).toEqual([1, 2, 3, 4]);
    await store.close();
  });
});
