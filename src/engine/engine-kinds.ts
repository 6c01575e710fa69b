// Every kind of engine a replica can be, with all that is particular to each: a new kind of
// OpenAI-compatible server (TGI, a llama.cpp server) is one more entry in HTTP_ENGINE_KINDS.
// The entries' names are FLEET_FILE's `kind` values.

/** The in-process model (src/engine/builtin/): FLEET_FILE `kind: builtin`. */
export const BUILTIN_KIND = 'builtin';

/** The in-process embedding model all-MiniLM-L6-v2 on onnxruntime (src/engine/embeddings/): FLEET_FILE `kind: minilm`. */
export const MINILM_KIND = 'minilm';

/** POSTs `body` as JSON to `path` under the server's root (where its admin endpoints live); throws unless it succeeded. */
export type AdminPost = (path: string, body?: unknown) => Promise<void>;

/** The names a kind of server gives its load gauges on its Prometheus page, each in the order to look for them. */
export interface LoadGaugeNames {
  /** Requests in the engine's running batch. */
  readonly running: readonly string[];
  /** Requests queued inside the engine, waiting for a place in the batch. */
  readonly waiting: readonly string[];
  /** KV-cache usage, 0–1. */
  readonly kvUsage: readonly string[];
}

export interface HttpEngineKind {
  /** What such a server is, for messages. */
  readonly server: string;
  /**
   * How the server serves new weights from a folder it can read (shared storage), without a
   * restart. Absent: it cannot, and a reload fails.
   */
  readonly reload?: (post: AdminPost, path: string) => Promise<void>;
  /**
   * How it reads the integer `priority` body field when started to schedule by it (FLEET_FILE
   * `priority_hints`): `lower-first`, or `higher-first` unless the server was started the other
   * way round (`priority_hints: low_values_first`). Absent: it takes no such field, and none is
   * sent (a generic server may reject unknown fields).
   */
  readonly priority?: 'lower-first' | 'higher-first';
  /** Its load gauges, read from FLEET_FILE `metrics_url`. */
  readonly gauges?: LoadGaugeNames;
}

export const HTTP_ENGINE_KINDS = {
  vllm: {
    server: 'vLLM server',
    // Needs VLLM_SERVER_DEV_MODE=1. Paused letting running requests finish, and resumed whatever
    // happened, so a failed reload leaves the server serving its old weights.
    reload: async (post, path) => {
      await post('/pause?mode=wait');
      try {
        await post('/collective_rpc', { method: 'reload_weights', kwargs: { weights_path: path } });
      } finally {
        await post('/resume');
      }
    },
    // --scheduling-policy priority; ties by arrival, and a waiting request may preempt running ones of a larger value.
    priority: 'lower-first',
    // vllm:gpu_cache_usage_perc is the older name (deprecated in vLLM's V1 engine); both are 0–1.
    gauges: { running: ['vllm:num_requests_running'], waiting: ['vllm:num_requests_waiting'], kvUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'] },
  },
  sglang: {
    server: 'SGLang server',
    reload: (post, path) => post('/update_weights_from_disk', { model_path: path }),
    // --enable-priority-scheduling; --schedule-low-priority-values-first turns it round.
    priority: 'higher-first',
    gauges: { running: ['sglang:num_running_reqs'], waiting: ['sglang:num_queue_reqs'], kvUsage: ['sglang:token_usage'] },
  },
  // Any other OpenAI-compatible server (llama.cpp, OpenAI itself): nothing is assumed of it.
  openai: {
    server: 'generic OpenAI-compatible server',
  },
} satisfies Record<string, HttpEngineKind>;

export type HttpEngineKindName = keyof typeof HTTP_ENGINE_KINDS;
export type ReplicaKind = typeof BUILTIN_KIND | typeof MINILM_KIND | HttpEngineKindName;

/** The kind of ENGINE_BASE_URL's server. */
export const ENGINE_BASE_URL_KIND: HttpEngineKindName = 'openai';

/** What is particular to an HTTP kind; undefined for the in-process ones. */
export function httpEngineKind(kind: ReplicaKind): HttpEngineKind | undefined {
  return kind === BUILTIN_KIND || kind === MINILM_KIND ? undefined : HTTP_ENGINE_KINDS[kind];
}

/** The HTTP kinds whose servers reload weights, in the table's order. */
export function kindsThatReload(): HttpEngineKindName[] {
  return (Object.keys(HTTP_ENGINE_KINDS) as HttpEngineKindName[]).filter((kind) => httpEngineKind(kind)?.reload !== undefined);
}

/** Every kind's names for each load gauge, in the table's order: a page is read for whichever it holds. */
export function loadGaugeNames(): LoadGaugeNames {
  const gauges = (Object.values(HTTP_ENGINE_KINDS) as HttpEngineKind[]).flatMap((kind) => (kind.gauges ? [kind.gauges] : []));
  return {
    running: gauges.flatMap((names) => names.running),
    waiting: gauges.flatMap((names) => names.waiting),
    kvUsage: gauges.flatMap((names) => names.kvUsage),
  };
}
