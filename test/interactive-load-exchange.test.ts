import { describe, expect, it } from 'vitest';
import { type InteractivePool, InteractiveLoadListener, InteractiveLoadReporter } from '../processors/messaging/interactive-load-exchange.js';
import { EmbeddedMessageLog } from '../src/message-log/embedded-message-log.js';
import { INTERACTIVE_LOAD_TOPIC, MessageSchemas } from '../src/messages/topics.js';

/** A model's pool as the exchange sees it: what it serves itself, and what it is told of others. */
class RecordingPool implements InteractivePool {
  readonly told: Array<{ source: string; load: number; share: number; queuedMs?: number }> = [];
  constructor(
    private readonly own: { arrivalsPerSecond: number; latencyMs: number } | undefined,
    private readonly queueing?: number,
  ) {}
  interactiveEstimate() {
    return this.own;
  }
  interactiveQueueing() {
    return this.queueing;
  }
  observeRemoteInteractive(source: string, load: number, share: number, queuedMs?: number): void {
    this.told.push({ source, load, share, ...(queuedMs !== undefined ? { queuedMs } : {}) });
  }
}

const quiet = { warn: () => undefined };

describe('interactive load between processes (over the message log)', () => {
  it('an API process reports the models it serves interactive traffic on; an inference processor keeps its share of the reserve for them', async () => {
    const messageLog = new EmbeddedMessageLog();
    const schemas = new MessageSchemas();
    await messageLog.ensureTopics([{ topic: INTERACTIVE_LOAD_TOPIC, partitions: 1 }]);
    const now = 1_000_000;
    // The API process: 20 requests a second of 100 ms on one model, none on the other.
    const reporter = new InteractiveLoadReporter({
      messageLog,
      schemas,
      pools: () => [
        // Its interactive requests came 7.5 ms later than the engine's floor (the median), lately.
        { model: 'busy', pool: new RecordingPool({ arrivalsPerSecond: 20, latencyMs: 100 }, 7.5) },
        { model: 'idle', pool: new RecordingPool(undefined) },
      ],
      source: 'api-host:1',
      now: () => now,
      log: quiet,
    });
    // An inference processor holding half the inference partitions.
    const busy = new RecordingPool(undefined);
    const idle = new RecordingPool(undefined);
    const listener = new InteractiveLoadListener({
      messageLog,
      schemas,
      poolFor: (model) => (model === 'busy' ? busy : model === 'idle' ? idle : undefined),
      share: () => 0.5,
      source: 'inference-host:2',
      groupId: 'interactive-load-test',
      now: () => now + 500,
      log: quiet,
    });
    await listener.start();
    try {
      expect(await reporter.reportOnce()).toBe(1);
      // Its own reports (a process with both roles), stale ones and malformed ones count for nothing.
      await messageLog.publish(INTERACTIVE_LOAD_TOPIC, [
        { key: 'busy', value: schemas.encodeInteractiveLoad({ model: 'busy', source: 'inference-host:2', arrivals_per_second: 50, latency_ms: 100, at: now }) },
        { key: 'busy', value: schemas.encodeInteractiveLoad({ model: 'busy', source: 'api-host:3', arrivals_per_second: 50, latency_ms: 100, at: now - 60_000 }) },
        { key: 'busy', value: '{"model":"busy"}' },
        { key: 'unknown', value: schemas.encodeInteractiveLoad({ model: 'unknown', source: 'api-host:3', arrivals_per_second: 5, latency_ms: 100, at: now }) },
      ]);
      const deadline = Date.now() + 5_000;
      while (listener.applied < 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      await new Promise((resolve) => setTimeout(resolve, 100));
      // 20/s × 0.1 s = 2 requests in service, of whose reserve this processor keeps half.
      expect(busy.told).toEqual([{ source: 'api-host:1', load: 2, share: 0.5, queuedMs: 7.5 }]);
      expect(idle.told).toEqual([]);
      expect(listener.applied).toBe(1);
    } finally {
      await listener.stop();
      await messageLog.close();
    }
  });

  it('refuses to publish a report that does not match its schema', () => {
    expect(() => new MessageSchemas().encodeInteractiveLoad({ model: '', source: 'x', arrivals_per_second: -1, latency_ms: 1, at: 1 })).toThrow(/interactive-load message does not match its schema/);
  });
});
