import { defineConfig } from 'vitest/config';

// The fast tier: pure domain specs, the architecture rule, and the embedded adapters' contract
// suites. Nothing here needs the S3 server or the Kafka broker, so there is no global setup.
export default defineConfig({
  test: {
    root: new URL('..', import.meta.url).pathname,
    include: [
      'test/domain/**/*.test.ts',
      'test/architecture.test.ts',
      'test/wiring-lifecycle.test.ts',
      'test/event-store.sqlite.test.ts',
      'test/blob-store.local.test.ts',
      'test/message-log.embedded.test.ts',
    ],
    testTimeout: 60_000,
    maxWorkers: 2,
    reporters: ['default'],
  },
});
