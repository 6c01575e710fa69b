import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Consumer, DeliveredMessage, MessageLog } from '../../src/message-log/message-log.js';

async function until(condition: () => boolean, timeoutMs = 30_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const quiet = () => new Promise((resolve) => setTimeout(resolve, 1_000));

/**
 * One key's values as delivered (the messages were published 0, 1, 2, …): each the one after the
 * value before it, or a redelivery, going back to a message delivered already and on from there
 * (at least once: a member the group lost while its messages were not yet committed, say, on a
 * loaded machine); never one ahead of the next not yet delivered. Every message at least once.
 */
function expectPublishedOrder(values: readonly number[] | undefined, count: number): void {
  expect(values).toBeDefined();
  let highest = -1;
  values!.forEach((value, index) => {
    const previous = index === 0 ? -1 : values![index - 1]!;
    if (!(value === previous + 1 || value <= previous) || value > highest + 1) throw new Error(`delivered out of order: ${values!.join(', ')}`);
    highest = Math.max(highest, value);
  });
  expect([...new Set(values)]).toEqual(Array.from({ length: count }, (_, index) => index));
}

/**
 * What every message log adapter must do. Topics and groups are named afresh for each test, so the
 * suite also runs against a shared cluster.
 */
export function messageLogContract(name: string, open: () => Promise<MessageLog>): void {
  describe(`message log contract: ${name}`, () => {
    let log: MessageLog;
    const consumers: Consumer[] = [];
    const unique = (label: string) => `contract.${label}.${randomUUID().slice(0, 8)}`;
    const consume = async (...args: Parameters<MessageLog['consume']>) => {
      const consumer = await log.consume(...args);
      consumers.push(consumer);
      return consumer;
    };

    beforeAll(async () => {
      log = await open();
    });
    afterEach(async () => {
      await Promise.all(consumers.splice(0).map((consumer) => consumer.stop().catch(() => undefined)));
    });
    afterAll(async () => {
      await log?.close();
    });

    it('delivers the messages of one key in the order they were published', async () => {
      const topic = unique('order');
      await log.ensureTopics([{ topic, partitions: 4 }]);
      const keys = ['a', 'b', 'c', 'd', 'e'];
      for (let round = 0; round < 20; round++) {
        await log.publish(topic, keys.map((key) => ({ key, value: String(round), headers: { round: String(round) } })));
      }
      const seen = new Map<string, number[]>();
      await consume({ groupId: unique('g'), topics: [topic], concurrency: 4 }, async (message) => {
        seen.set(message.key, [...(seen.get(message.key) ?? []), Number(message.value)]);
        expect(message.headers.round).toBe(message.value);
      });
      await until(() => keys.every((key) => new Set(seen.get(key)).size === 20));
      for (const key of keys) expectPublishedOrder(seen.get(key), 20);
    });

    it('lays messages with a spread round robin over the partitions', async () => {
      const topic = unique('spread');
      await log.ensureTopics([{ topic, partitions: 4 }]);
      await log.publish(topic, Array.from({ length: 12 }, (_, index) => ({ key: 'same key', value: String(index), spread: 5 + index })));
      const partitions = new Map<string, number>();
      await consume({ groupId: unique('g'), topics: [topic], concurrency: 4 }, async (message) => void partitions.set(message.value, message.partition));
      await until(() => partitions.size >= 12);
      for (let index = 0; index < 12; index++) expect(partitions.get(String(index))).toBe((5 + index) % 4);
    });

    it('shares a topic between the members of a group: each message reaches one member once', async () => {
      const topic = unique('share');
      await log.ensureTopics([{ topic, partitions: 4 }]);
      const group = unique('g');
      const received: Array<Array<string>> = [[], []];
      for (const index of [0, 1]) await consume({ groupId: group, topics: [topic], concurrency: 4 }, async (message) => void received[index]!.push(message.value));
      // Keep publishing until both members have work, however long the group takes to settle.
      let published = 0;
      while (received[0]!.length === 0 || received[1]!.length === 0) {
        if (published > 2_000) throw new Error('one member of the group never received a message');
        await log.publish(topic, Array.from({ length: 20 }, () => ({ key: randomUUID(), value: String(published++) })));
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await until(() => received[0]!.length + received[1]!.length >= published);
      await quiet();
      const all = [...received[0]!, ...received[1]!];
      expect(all.length).toBe(published);
      expect(new Set(all).size).toBe(published);
    });

    it('delivers again what a member took but never committed, once that member is gone', async () => {
      const topic = unique('redeliver');
      await log.ensureTopics([{ topic, partitions: 1 }]);
      const group = unique('g');
      await log.publish(topic, [{ key: 'k', value: 'first' }, { key: 'k', value: 'second' }]);
      let taken: DeliveredMessage | undefined;
      const dying = await log.consume({ groupId: group, topics: [topic] }, (message) => {
        taken = message;
        return new Promise<void>(() => undefined); // stuck: never commits
      });
      await until(() => taken !== undefined);
      await dying.abandon();

      const after: DeliveredMessage[] = [];
      await consume({ groupId: group, topics: [topic] }, async (message) => void after.push(message));
      await until(() => after.length >= 2);
      expect(taken!.value).toBe('first');
      expect(after.map((message) => [message.value, message.offset])).toEqual([
        ['first', taken!.offset],
        ['second', String(BigInt(taken!.offset) + 1n)],
      ]);
    });

    it('commits what a stopping member finishes, and hands on only what it did not start', async () => {
      const topic = unique('stop');
      await log.ensureTopics([{ topic, partitions: 1 }]);
      const group = unique('g');
      await log.publish(topic, [{ key: 'k', value: 'slow' }, { key: 'k', value: 'after' }]);
      let release: () => void = () => undefined;
      let started = false;
      const stopping = await log.consume({ groupId: group, topics: [topic] }, async (message) => {
        if (message.value !== 'slow') return;
        started = true;
        await new Promise<void>((resolve) => (release = resolve));
      });
      await until(() => started);
      const stopped = stopping.stop();
      release();
      await stopped;
      const later: string[] = [];
      await consume({ groupId: group, topics: [topic] }, async (message) => void later.push(message.value));
      await until(() => later.length >= 1);
      await quiet();
      expect(later).toEqual(['after']);
    });

    it('resumes a group from its committed offsets; a new group starts at the beginning', async () => {
      const topic = unique('resume');
      await log.ensureTopics([{ topic, partitions: 2 }]);
      const group = unique('g');
      await log.publish(topic, Array.from({ length: 10 }, (_, index) => ({ key: `k${index % 3}`, value: `old-${index}` })));
      const first: string[] = [];
      const early = await log.consume({ groupId: group, topics: [topic], concurrency: 2 }, async (message) => void first.push(message.value));
      await until(() => first.length >= 10);
      await early.stop();

      await log.publish(topic, Array.from({ length: 5 }, (_, index) => ({ key: `k${index % 3}`, value: `new-${index}` })));
      const second: string[] = [];
      await consume({ groupId: group, topics: [topic], concurrency: 2 }, async (message) => void second.push(message.value));
      const fresh: string[] = [];
      await consume({ groupId: unique('h'), topics: [topic], concurrency: 2 }, async (message) => void fresh.push(message.value));
      await until(() => second.length >= 5 && fresh.length >= 15);
      await quiet();
      expect(second.sort()).toEqual(['new-0', 'new-1', 'new-2', 'new-3', 'new-4']);
      expect(fresh).toHaveLength(15);
    });

    it('with `startAt: latest`, a new group gets only what is published after it joined; a group that committed resumes where it was', async () => {
      const topic = unique('latest');
      await log.ensureTopics([{ topic, partitions: 2 }]);
      await log.publish(topic, Array.from({ length: 6 }, (_, index) => ({ key: `k${index}`, value: `before-${index}` })));
      const group = unique('g');
      const seen: string[] = [];
      const latest = await log.consume({ groupId: group, topics: [topic], concurrency: 2, startAt: 'latest' }, async (message) => void seen.push(message.value));
      // Kafka resets a partition without a committed offset at its first fetch, a moment after the
      // join: publish until messages arrive, and none published before the join may.
      for (let round = 0; !seen.some((value) => value.startsWith('after-')); round++) {
        if (round > 100) throw new Error('nothing published after the join arrived');
        await log.publish(topic, [{ key: `k${round % 2}`, value: `after-${round}` }, { key: `k${(round % 2) + 1}`, value: `after-${round}b` }]);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      // One on k0's partition, so that the group has committed there before it leaves.
      await log.publish(topic, [{ key: 'k0', value: 'after-last' }]);
      await until(() => seen.includes('after-last'), 30_000, 'a message on k0 after the join');
      await quiet();
      expect(seen.filter((value) => value.startsWith('before-'))).toEqual([]);
      await latest.stop();
      // Committed offsets win over `startAt`: published while the group was away, still delivered.
      await log.publish(topic, [{ key: 'k0', value: 'away' }]);
      const again: string[] = [];
      await consume({ groupId: group, topics: [topic], concurrency: 2, startAt: 'latest' }, async (message) => void again.push(message.value));
      await until(() => again.includes('away'), 30_000, 'the message published while the group was away');
    });

    it('hands up to `prefetch` messages of one partition to the handler at once, and no more', async () => {
      const topic = unique('prefetch');
      await log.ensureTopics([{ topic, partitions: 1 }]);
      await log.publish(topic, ['one', 'two', 'three', 'four'].map((value) => ({ key: 'k', value })));
      const started: string[] = [];
      const finished: string[] = [];
      let running = 0;
      let mostRunning = 0;
      let finishedBeforeFour = -1;
      await consume({ groupId: unique('g'), topics: [topic], prefetch: 3 }, async (message) => {
        if (message.value === 'four') finishedBeforeFour = finished.length;
        started.push(message.value);
        running++;
        mostRunning = Math.max(mostRunning, running);
        // The first three are held until all three have started: only a consumer that hands them
        // over together gets past this.
        if (message.value !== 'four') await until(() => started.length >= 3, 10_000, 'three messages started at once');
        running--;
        finished.push(message.value);
      });
      await until(() => finished.length >= 4, 15_000, 'every message finished');
      expect(started).toEqual(['one', 'two', 'three', 'four']);
      expect(mostRunning).toBe(3);
      // The fourth waited for a place in the window.
      expect(finishedBeforeFour).toBeGreaterThanOrEqual(1);
    });

    it('with `prefetch`, commits only the finished prefix: what came after a message still running is delivered again', async () => {
      const topic = unique('prefix');
      await log.ensureTopics([{ topic, partitions: 1 }]);
      const group = unique('g');
      await log.publish(topic, ['one', 'two', 'three'].map((value) => ({ key: 'k', value })));
      const finished: string[] = [];
      let firstStarted = false;
      const dying = await log.consume({ groupId: group, topics: [topic], prefetch: 3 }, async (message) => {
        if (message.value === 'one') {
          firstStarted = true;
          return new Promise<void>(() => undefined); // still running when the member dies
        }
        finished.push(message.value);
      });
      await until(() => firstStarted && finished.length >= 2, 15_000, 'two and three finished while one runs');
      await new Promise((resolve) => setTimeout(resolve, 500)); // room for a wrong commit to land
      await dying.abandon();

      const after: DeliveredMessage[] = [];
      await consume({ groupId: group, topics: [topic] }, async (message) => void after.push(message));
      await until(() => after.length >= 3);
      await quiet();
      expect(after.map((message) => message.value)).toEqual(['one', 'two', 'three']);
    });

    it('with `prefetch`, commits everything once the message holding the prefix back finishes and the member stops', async () => {
      const topic = unique('prefix-stop');
      await log.ensureTopics([{ topic, partitions: 1 }]);
      const group = unique('g');
      await log.publish(topic, ['one', 'two', 'three'].map((value) => ({ key: 'k', value })));
      const finished: string[] = [];
      let release: () => void = () => undefined;
      let firstStarted = false;
      const stopping = await log.consume({ groupId: group, topics: [topic], prefetch: 3 }, async (message) => {
        if (message.value === 'one') {
          firstStarted = true;
          await new Promise<void>((resolve) => (release = resolve));
        }
        finished.push(message.value);
      });
      await until(() => firstStarted && finished.length >= 2, 15_000, 'two and three finished while one runs');
      const stopped = stopping.stop();
      release();
      await stopped;
      expect(finished.sort()).toEqual(['one', 'three', 'two']);

      await log.publish(topic, [{ key: 'k', value: 'four' }]);
      const later: string[] = [];
      await consume({ groupId: group, topics: [topic] }, async (message) => void later.push(message.value));
      await until(() => later.length >= 1);
      await quiet();
      expect(later).toEqual(['four']);
    });

    it('with `prefetch`, hands over a message published after the ones still running, and commits only the finished prefix', async () => {
      // Messages one and two are held by the member (running) before three is published: three
      // must join them in the window rather than wait for them to finish.
      const heldThenJoined = async (group: string, topic: string) => {
        await log.publish(topic, ['one', 'two'].map((value) => ({ key: 'k', value })));
        const started: string[] = [];
        const finished: string[] = [];
        let release: () => void = () => undefined;
        const released = new Promise<void>((resolve) => (release = resolve));
        const consumer = await log.consume({ groupId: group, topics: [topic], prefetch: 3 }, async (message) => {
          started.push(message.value);
          if (message.value !== 'three') await released;
          finished.push(message.value);
        });
        await until(() => started.length >= 2, 15_000, 'one and two started');
        await new Promise((resolve) => setTimeout(resolve, 500)); // the member holds them a while
        await log.publish(topic, [{ key: 'k', value: 'three' }]);
        await until(() => finished.includes('three'), 15_000, 'three finished while one and two run');
        expect(started).toEqual(['one', 'two', 'three']);
        expect(finished).toEqual(['three']);
        return { consumer, release, finished };
      };
      const redelivered = async (group: string, topic: string, count: number) => {
        const after: string[] = [];
        await consume({ groupId: group, topics: [topic] }, async (message) => void after.push(message.value));
        await until(() => after.length >= count);
        await quiet();
        return after;
      };

      const abandonedTopic = unique('window-abandon');
      await log.ensureTopics([{ topic: abandonedTopic, partitions: 1 }]);
      const abandonedGroup = unique('g');
      const abandoned = await heldThenJoined(abandonedGroup, abandonedTopic);
      await new Promise((resolve) => setTimeout(resolve, 500)); // room for a wrong commit to land
      await abandoned.consumer.abandon();
      abandoned.release();
      expect(await redelivered(abandonedGroup, abandonedTopic, 3)).toEqual(['one', 'two', 'three']);

      const stoppedTopic = unique('window-stop');
      await log.ensureTopics([{ topic: stoppedTopic, partitions: 1 }]);
      const stoppedGroup = unique('g');
      const stopped = await heldThenJoined(stoppedGroup, stoppedTopic);
      const stopping = stopped.consumer.stop();
      stopped.release();
      await stopping;
      expect(stopped.finished.sort()).toEqual(['one', 'three', 'two']);
      await log.publish(stoppedTopic, [{ key: 'k', value: 'four' }]);
      expect(await redelivered(stoppedGroup, stoppedTopic, 1)).toEqual(['four']);
    });

    it('with `prefetch`, retries a failed message while later ones finish, and commits past it only once it succeeds', async () => {
      const topic = unique('prefix-retry');
      await log.ensureTopics([{ topic, partitions: 1 }]);
      const group = unique('g');
      await log.publish(topic, ['one', 'two', 'three'].map((value) => ({ key: 'k', value })));
      const calls: string[] = [];
      let failing = true;
      const first = await log.consume({ groupId: group, topics: [topic], prefetch: 3, retryDelayMs: 50 }, async (message) => {
        calls.push(message.value);
        if (message.value === 'one' && failing) throw new Error('not yet');
      });
      await until(() => calls.includes('two') && calls.includes('three') && calls.filter((value) => value === 'one').length >= 3, 15_000, 'one retried while two and three finished');
      await first.abandon();
      // Nothing was committed past the failing message: a new member gets all three again.
      const again: string[] = [];
      failing = false;
      const second = await log.consume({ groupId: group, topics: [topic], prefetch: 3 }, async (message) => void again.push(message.value));
      await until(() => again.length >= 3);
      await second.stop();
      expect(again.sort()).toEqual(['one', 'three', 'two']);
      // Once it succeeded, all three are committed.
      await log.publish(topic, [{ key: 'k', value: 'four' }]);
      const later: string[] = [];
      await consume({ groupId: group, topics: [topic] }, async (message) => void later.push(message.value));
      await until(() => later.length >= 1);
      await quiet();
      expect(later).toEqual(['four']);
    });

    it('retries a message whose handler failed, before the messages after it', async () => {
      const topic = unique('retry');
      await log.ensureTopics([{ topic, partitions: 1 }]);
      await log.publish(topic, ['one', 'two', 'three'].map((value) => ({ key: 'k', value })));
      const calls: string[] = [];
      const errors: string[] = [];
      let failures = 2;
      await consume(
        { groupId: unique('g'), topics: [topic], retryDelayMs: 50, onError: (_error, message) => errors.push(message.value) },
        async (message) => {
          calls.push(message.value);
          if (message.value === 'two' && failures-- > 0) throw new Error('not yet');
        },
      );
      await until(() => calls.includes('three'));
      expect(calls).toEqual(['one', 'two', 'two', 'two', 'three']);
      expect(errors).toEqual(['two', 'two']);
    });
  });
}
