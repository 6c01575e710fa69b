import { defineConfig } from 'vitest/config';

// The fast tier: pure domain specs, the scheduler's pure modules, the architecture rule, the schema loader, and the
// embedded adapters' contract suites. Nothing here needs the S3 server or the Kafka broker, so there is no global setup.
export default defineConfig({
  test: {
    root: new URL('..', import.meta.url).pathname,
    include: [
      'test/domain/**/*.test.ts',
      'test/architecture.test.ts',
      'test/schemas.test.ts',
      'test/wiring-lifecycle.test.ts',
      'test/event-store.sqlite.test.ts',
      'test/blob-store.local.test.ts',
      'test/message-log.embedded.test.ts',
      'test/partition-window.test.ts',
      'test/work-consumer.test.ts',
      'test/interactive-load-exchange.test.ts',
      // The fleet scheduler's pure modules and the processors' timer.
      'test/scheduler.test.ts',
      'test/engine-capacity.test.ts',
      'test/interactive-objective.test.ts',
      'test/engine-model.test.ts',
      'test/interactive-headroom.test.ts',
      'test/engine-load-metrics.test.ts',
      'test/engine-priority.test.ts',
      'test/engine-kinds.test.ts',
      'test/chunk-admission.test.ts',
      'test/repeating-task.test.ts',
      'test/heap-policy.test.ts',
      'test/retry.test.ts',
      // Out-of-space classification and episodes (real SQLite, real statfs).
      'test/storage-space.test.ts',
    ],
    testTimeout: 60_000,
    maxWorkers: 2,
    reporters: ['default'],
  },
});
