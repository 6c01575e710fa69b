import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Logger, pino } from 'pino';
import { waitForReady } from './processes.js';
import { inject } from 'vitest';
import type { Clock } from '../../src/platform/clock.js';
import { loadConfig } from '../../src/config.js';
import type { UploadLimits } from '../../src/domain/file.js';
import type { Fleet } from '../../src/engine/fleet.js';
import type { EventStore } from '../../src/event-store/event-store.js';
import { type RunningService, startService } from '../../src/service.js';

export const TEST_API_KEY = 'test-api-key-0123456789';

export function tempDir(label = 'spool'): string {
  return mkdtempSync(join(tmpdir(), `${label}-`));
}

/** A clock a test can move; starts at a fixed, realistic time. */
export class ManualClock implements Clock {
  constructor(public seconds = 1_790_000_000) {}
  nowSeconds(): number {
    return this.seconds;
  }
  advance(seconds: number): void {
    this.seconds += seconds;
  }
}

/** S3 settings for the test run's S3-compatible server (see global-setup.ts). */
export function s3Env(prefix: string): Record<string, string> {
  return {
    BLOB_STORE: `s3://${inject('s3Bucket')}/${prefix}`,
    AWS_ENDPOINT_URL_S3: inject('s3Endpoint'),
    AWS_ACCESS_KEY_ID: 'S3RVER',
    AWS_SECRET_ACCESS_KEY: 'S3RVER',
    AWS_REGION: 'us-east-1',
    S3_FORCE_PATH_STYLE: 'true',
  };
}

export interface TestServiceOptions {
  dataDir?: string;
  clock?: Clock;
  limits?: UploadLimits;
  env?: Record<string, string>;
  /** Where the service logs; default: nowhere unless TEST_LOG_LEVEL is set. */
  logger?: Logger;
  /** A fleet made by the test (replicas that misbehave on purpose) instead of the configured one. */
  fleet?: Fleet;
  /** An event store made by the test (one that holds some appends back, say) instead of the data directory's. */
  eventStore?: EventStore;
}

/** A service running every role in one process: it has every part. */
export type WholeService = RunningService & {
  readonly dataDir: string;
  readonly readModels: NonNullable<RunningService['readModels']>;
  readonly projector: NonNullable<RunningService['projector']>;
  readonly fleet: NonNullable<RunningService['fleet']>;
  readonly sweeper: NonNullable<RunningService['sweeper']>;
};

/** The real service, in this process, on a free loopback port. */
export async function startTestService(options: TestServiceOptions = {}): Promise<WholeService> {
  const dataDir = options.dataDir ?? tempDir();
  // The AWS SDK reads credentials from the environment.
  for (const [name, value] of Object.entries(options.env ?? {})) if (name.startsWith('AWS_')) process.env[name] = value;
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, API_KEY: TEST_API_KEY, FILE_SWEEP_INTERVAL_SECONDS: '3600', ...options.env });
  const service = await startService({
    config,
    logger: options.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.fleet ? { fleet: options.fleet } : {}),
    ...(options.eventStore ? { eventStore: options.eventStore } : {}),
  });
  await waitUntilReady(service.url);
  const { readModels, projector, fleet, sweeper } = service;
  if (!readModels || !projector || !fleet || !sweeper) throw new Error('the test service runs every role: it should have every part');
  return { ...service, dataDir, readModels, projector, fleet, sweeper };
}

/** Resolves once the service answers /ready with 200. */
export const waitUntilReady = (url: string, timeoutMs = 30_000): Promise<void> => waitForReady(url, timeoutMs);

/** Posts a multipart upload built by hand, so tests control every byte of it. */
export async function uploadFile(
  url: string,
  parts: { purpose?: string; filename?: string; content?: string | Buffer; fields?: Record<string, string> },
): Promise<Response> {
  const form = new FormData();
  if (parts.purpose !== undefined) form.append('purpose', parts.purpose);
  for (const [name, value] of Object.entries(parts.fields ?? {})) form.append(name, value);
  if (parts.content !== undefined) form.append('file', new Blob([parts.content]), parts.filename ?? 'input.jsonl');
  return fetch(`${url}/v1/files`, { method: 'POST', body: form });
}
