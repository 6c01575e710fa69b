import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LineOutcomeLog } from '../src/application/line-outcomes.js';
import { deterministicUuid } from '../src/domain/derived-ids.js';
import { type LineOutcome, lineOutcomeEventId } from '../src/domain/line-outcome.js';
import { batchLinesStreamName } from '../src/domain/stream-names.js';
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

  it('drops a line its chunk already holds under another event id, as an earlier version recorded it', async () => {
    const store = new SqliteEventStore(join(tempDir('outcomes-earlier-ids'), 'events.sqlite'));
    // Earlier versions derived a line's event id from a hash of batch and line.
    const earlier = outcome(2, 'earlier');
    await store.appendToStream(batchLinesStreamName('batch_x', 0), [
      { id: deterministicUuid('batch_x/line/2'), type: earlier.type, data: earlier.data as unknown as Record<string, unknown>, metadata: { schemaVersion: 1 } },
    ]);
    expect(await new LineOutcomeLog(store).record('batch_x', 0, [outcome(1, 'now'), outcome(2, 'now')], 'test')).toBe(1);
    // A log that has not seen the chunk yet reads both ids' lines from the stream.
    expect(await new LineOutcomeLog(store).record('batch_x', 0, [outcome(2, 'again'), outcome(1, 'again')], 'test')).toBe(0);
    const events = await new LineOutcomeLog(store).read('batch_x', 0);
    expect(events.map((event) => [(event.data as { line: number }).line, (event.data as { request_id: string }).request_id])).toEqual([
      [2, 'earlier'],
      [1, 'now'],
    ]);
    expect(events[1]!.id).toBe(lineOutcomeEventId('batch_x', 1));
    await store.close();
  });

  for (const storeTells of [true, false]) {
    it(`counts none of a group as its own when another writer records the same lines between its read and its append${storeTells ? '' : ' (a store that cannot say an append was a repeat)'}`, async () => {
      const path = join(tempDir('outcomes-repeat'), 'events.sqlite');
      const storeA = new SqliteEventStore(path);
      const storeB = new SqliteEventStore(path);
      const a = new LineOutcomeLog(storeA);
      // B's store: its next read of the chunk ends only after A has recorded lines 3 and 4, so
      // B's append of the same lines expects the revision A's append took, and its events' ids
      // (derived from batch and line) are A's.
      let raceNextRead = false;
      const raced = new Proxy(storeB, {
        get(target, key, receiver) {
          if (key === 'readStream') {
            return async function* (stream: string, options?: { fromRevision?: bigint }) {
              yield* target.readStream(stream, options);
              if (!raceNextRead) return;
              raceNextRead = false;
              expect(await a.record('batch_x', 0, [outcome(3, 'a'), outcome(4, 'a')], 'test')).toBe(2);
            };
          }
          if (key === 'appendToStream' && !storeTells) {
            return async (...args: Parameters<SqliteEventStore['appendToStream']>) => {
              const { repeated: _repeated, ...answer } = await target.appendToStream(...args);
              return answer;
            };
          }
          const value = Reflect.get(target, key, receiver) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const recordedByB: number[] = [];
      const b = new LineOutcomeLog(raced, (_batch, outcomes) => recordedByB.push(...outcomes.map((one) => one.data.line)));
      expect(await a.record('batch_x', 0, [outcome(1, 'a'), outcome(2, 'a')], 'test')).toBe(2);
      expect(await b.record('batch_x', 0, [outcome(5, 'b')], 'test')).toBe(1);
      raceNextRead = true;
      expect(await b.record('batch_x', 0, [outcome(3, 'b'), outcome(4, 'b')], 'test')).toBe(0);
      expect(raceNextRead).toBe(false);
      // B goes on recording after the lines it lost, and counts only its own.
      expect(await b.record('batch_x', 0, [outcome(4, 'b'), outcome(6, 'b')], 'test')).toBe(1);
      expect(recordedByB).toEqual([5, 6]);
      const held = (await a.read('batch_x', 0)).map((event) => [(event.data as { line: number }).line, (event.data as { request_id: string }).request_id]);
      expect(held).toEqual([
        [1, 'a'],
        [2, 'a'],
        [5, 'b'],
        [3, 'a'],
        [4, 'a'],
        [6, 'b'],
      ]);
      await storeA.close();
      await storeB.close();
    });
  }

  it('gives each line a UUID of its own that sorts by line within its batch', () => {
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    const lines = [0, 1, 9, 10, 255, 256, 4095, 49_999, 2 ** 32 - 1];
    const ids = lines.map((line) => lineOutcomeEventId('batch_a', line));
    for (const id of ids) expect(id).toMatch(uuid);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(lines.length);
    // Another batch's ids share none of these, and its own prefix.
    const other = lines.map((line) => lineOutcomeEventId('batch_b', line));
    expect(other.filter((id) => ids.includes(id))).toEqual([]);
    expect(new Set(other.map((id) => id.slice(0, 28))).size).toBe(1);
    expect(other[0]!.slice(0, 28)).not.toBe(ids[0]!.slice(0, 28));
    // Asked again after another batch, the same line gets the same id.
    expect(lineOutcomeEventId('batch_a', 9)).toBe(ids[2]);
    expect(() => lineOutcomeEventId('batch_a', 2 ** 32)).toThrow(RangeError);
    expect(() => lineOutcomeEventId('batch_a', -1)).toThrow(RangeError);
  });
});
