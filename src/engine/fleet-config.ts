import { existsSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { BuiltinEngine } from './builtin/builtin-engine.js';
import { DEFAULT_CHECKPOINT, createCheckpoint } from './builtin/checkpoint.js';
import { Transformer } from './builtin/transformer.js';
import { MINILM_MODEL } from './embeddings/minilm-files.js';
import { MiniLmModel } from './embeddings/minilm-model.js';
import { MiniLmReplica } from './embeddings/minilm-replica.js';
import { BUILTIN_KIND, ENGINE_BASE_URL_KIND, MINILM_KIND, type HttpEngineKindName, type ReplicaKind, httpEngineKind } from './engine-kinds.js';
import { Fleet } from './fleet.js';
import type { FleetSettings } from './fleet-settings.js';
import { HttpReplica, type HttpReplicaSettings } from './http-replica.js';
import { BuiltinReplica, type Replica, sharedWeights } from './replica.js';
import { ReplicaPool } from './replica-pool.js';
import { ImageResolver } from './images/image-resolver.js';
import { PRIVATE_DIRECTORY_MODE, PRIVATE_FILE_MODE } from '../platform/private-files.js';
import { readJsonFile } from '../platform/schemas.js';

/** The model the embedded default serves, on a checkpoint generated on first start. */
export const DEFAULT_MODEL = 'spool-tiny';

/**
 * A `minilm` replica's concurrency unless FLEET_FILE names one: two of the model's runs (64
 * inputs each), so that the next run's requests are already waiting when a run ends and the model
 * never waits for this process to send them (64: 69-78% of onnxruntime called directly on a
 * 10,000-line batch; 128: 78-84%, bench/FINDINGS.md).
 */
export const MINILM_CONCURRENCY = 128;

/** The fleet without FLEET_FILE: spool-tiny on a generated checkpoint, and the built-in embedding model. */
export const DEFAULT_FLEET: FleetSpec = {
  models: { [DEFAULT_MODEL]: { replicas: [{ kind: BUILTIN_KIND }] }, [MINILM_MODEL]: { replicas: [{ kind: MINILM_KIND }] } },
};

export interface ReplicaSpec {
  /** A name in engine-kinds.ts. */
  readonly kind: ReplicaKind;
  /** builtin: a checkpoint folder; default DATA_DIR/checkpoints/<model>, generated if missing. (minilm takes none: its files are MODELS_DIR's.) */
  readonly checkpoint?: string;
  /** vllm, sglang, openai: the server's OpenAI base URL, e.g. http://10.0.0.5:8000/v1. */
  readonly base_url?: string;
  readonly api_key?: string;
  readonly concurrency?: number;
  readonly timeout_seconds?: number;
  /** vllm, sglang: send each request's urgency in the server's priority field. */
  readonly priority_hints?: boolean | 'low_values_first';
  /** vllm, sglang: the server's Prometheus metrics; default /metrics at base_url's origin; false: not read. */
  readonly metrics_url?: string | false;
}

export interface FleetSpec {
  readonly models: Readonly<Record<string, { readonly replicas: readonly ReplicaSpec[]; readonly interactive_p99_ms?: number }>>;
}

/**
 * Where a replica's load gauges are read: FLEET_FILE's `metrics_url`, else, for a kind that
 * publishes them (engine-kinds.ts), /metrics at its base URL's origin, where vLLM serves them (and
 * SGLang, started with --enable-metrics). A server that answers there with something else is read
 * as having no gauges, and its capacity is learned from throughput alone.
 */
export function metricsUrlOf(replica: ReplicaSpec): string | undefined {
  if (replica.metrics_url === false) return undefined;
  if (replica.metrics_url) return replica.metrics_url;
  if (!httpEngineKind(replica.kind)?.gauges || !replica.base_url) return undefined;
  return new URL('/metrics', replica.base_url).href;
}

export function readFleetSpec(path: string): FleetSpec {
  return readJsonFile<FleetSpec>(path, 'fleet', 'FLEET_FILE');
}

/** Loads a checkpoint folder, generating the default one on first start. */
function loadBuiltinModel(model: string, checkpoint: string, generateIfMissing: boolean): Transformer {
  if (!existsSync(join(checkpoint, 'config.json'))) {
    if (!generateIfMissing) throw new Error(`model ${model}: no checkpoint at ${checkpoint}`);
    // Generated under DATA_DIR, so private like everything else there.
    createCheckpoint(checkpoint, DEFAULT_CHECKPOINT, { directory: PRIVATE_DIRECTORY_MODE, file: PRIVATE_FILE_MODE });
  }
  return sharedWeights(checkpoint);
}

/**
 * The fleet from FLEET_FILE, or by default DEFAULT_FLEET; ENGINE_BASE_URL adds an
 * OpenAI-compatible server for the models it lists (every other model when `*`).
 */
export async function openFleet(settings: FleetSettings, log?: Pick<Logger, 'warn' | 'info' | 'child'>): Promise<Fleet> {
  const { engine } = settings;
  const spec: FleetSpec = settings.fleetFile ? readFleetSpec(settings.fleetFile) : DEFAULT_FLEET;
  const poolSettings = { maxAttempts: engine.maxAttempts, backoffMs: engine.backoffMs, cooldownMs: engine.cooldownMs };
  const fallbackSettings = { ...poolSettings, ...(engine.interactiveP99Ms !== undefined ? { interactiveP99Ms: engine.interactiveP99Ms } : {}) };
  const { defaultRegion, ...imageSettings } = settings.images;
  const images = new ImageResolver(settings.s3Client, defaultRegion, imageSettings, log?.child({ component: 'images' }));
  // One embedding model per process, whatever number of replicas serve it.
  let miniLm: MiniLmModel | undefined;
  const sharedMiniLm = () => (miniLm ??= new MiniLmModel({ modelsDir: settings.models.dir, fetch: settings.models.fetch, ...(settings.models.threads ? { threads: settings.models.threads } : {}) }, log?.child({ component: 'models' })));
  const http = (id: string, kind: HttpEngineKindName, baseUrl: string, apiKey: string | undefined, timeoutMs: number, extra: Partial<HttpReplicaSettings> = {}) =>
    new HttpReplica(id, kind, baseUrl, { timeoutMs, ...(apiKey ? { apiKey } : {}), ...extra });

  const pools = new Map<string, ReplicaPool>();
  for (const [model, { replicas, interactive_p99_ms: objective }] of Object.entries(spec.models)) {
    const members = replicas.map((replica, index): { replica: Replica; concurrency: number } => {
      const id = `${model}/${index}`;
      if (replica.kind === MINILM_KIND) return { replica: new MiniLmReplica(id, sharedMiniLm(), model), concurrency: replica.concurrency ?? MINILM_CONCURRENCY };
      if (replica.kind === BUILTIN_KIND) {
        const explicit = replica.checkpoint !== undefined;
        const checkpoint = explicit ? (isAbsolute(replica.checkpoint!) ? replica.checkpoint! : resolve(replica.checkpoint!)) : join(settings.dataDir, 'checkpoints', model);
        // Replicas on one folder share its (read-only) weights; each replica swaps on its own.
        const weights = loadBuiltinModel(model, checkpoint, !explicit);
        return { replica: new BuiltinReplica(id, new BuiltinEngine(weights, model), checkpoint), concurrency: replica.concurrency ?? engine.builtinConcurrency };
      }
      return {
        replica: http(id, replica.kind, replica.base_url!, replica.api_key ?? engine.apiKey, (replica.timeout_seconds ?? engine.timeoutMs / 1000) * 1000, {
          ...(replica.priority_hints ? { priorityHints: replica.priority_hints } : {}),
          ...(metricsUrlOf(replica) ? { metricsUrl: metricsUrlOf(replica)! } : {}),
        }),
        concurrency: replica.concurrency ?? engine.concurrency,
      };
    });
    const interactiveP99Ms = objective ?? engine.interactiveP99Ms;
    pools.set(model, new ReplicaPool(model, members, { ...poolSettings, ...(interactiveP99Ms !== undefined ? { interactiveP99Ms } : {}) }, images));
  }

  let fallback: ReplicaPool | undefined;
  const { baseUrl, models } = engine;
  if (baseUrl) {
    const member = () => ({ replica: http(`${baseUrl}`, ENGINE_BASE_URL_KIND, baseUrl, engine.apiKey, engine.timeoutMs), concurrency: engine.concurrency });
    if (models === '*') fallback = new ReplicaPool('*', [member()], fallbackSettings, images);
    else {
      // One server, one pool: its concurrency limit holds across the models it serves.
      const shared = new ReplicaPool(models.join(','), [member()], fallbackSettings, images);
      for (const model of models) if (!pools.has(model)) pools.set(model, shared);
    }
  }
  return new Fleet(pools, fallback, () => miniLm?.close());
}
