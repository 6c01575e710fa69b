import { randomUUID } from 'node:crypto';
import { Agent as HttpAgent, type IncomingHttpHeaders, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { BuiltinEngine, TextDelta } from './builtin/builtin-engine.js';
import type { Transformer } from './builtin/transformer.js';
import { ConcurrencyLimit } from './concurrency-limit.js';
import { type EngineDirectory, type EngineRequest, type EngineResponse, EngineUnavailableError, type InferenceEngine, RequestWithdrawnError } from './engine.js';
import { ImageFetchError, type ImageResolver } from './image-resolver.js';

export type ReplicaKind = 'builtin' | 'vllm' | 'sglang' | 'openai';

/** One server (or the in-process model) that serves a model. send() is a single attempt. */
export interface Replica {
  readonly id: string;
  readonly kind: ReplicaKind;
  readonly description: string;
  /** Throws when there is no answer at all (connection refused, timeout). */
  send(request: EngineRequest, onDelta?: TextDelta): Promise<EngineResponse>;
  health(): Promise<boolean>;
}

/** The in-process built-in model as a replica. */
export class BuiltinReplica implements Replica {
  readonly kind = 'builtin' as const;
  readonly description: string;
  constructor(readonly id: string, readonly engine: BuiltinEngine, private served: string) {
    this.description = `built-in ${engine.modelName}`;
  }

  /** The checkpoint this replica serves: a local folder, or the s3:// location it was synced from. */
  get checkpoint(): string {
    return this.served;
  }

  /** New requests run on the new weights; requests already running finish on the old ones. */
  swap(model: Transformer, checkpoint: string): void {
    this.engine.swap(model);
    this.served = checkpoint;
  }

  send(request: EngineRequest, onDelta?: TextDelta): Promise<EngineResponse> {
    return this.engine.infer(request, onDelta);
  }
  async health(): Promise<boolean> {
    return true;
  }
}

/** An OpenAI-compatible HTTP server: vLLM, SGLang, llama.cpp, OpenAI. */
export class HttpReplica implements Replica {
  readonly description: string;
  private readonly agent: HttpAgent;
  constructor(
    readonly id: string,
    readonly kind: Exclude<ReplicaKind, 'builtin'>,
    /** The server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1. */
    readonly baseUrl: string,
    private readonly settings: { apiKey?: string; timeoutMs: number },
  ) {
    this.description = `${kind} ${baseUrl}`;
    this.agent = baseUrl.startsWith('https:') ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
  }

  async send(request: EngineRequest, onDelta?: TextDelta): Promise<EngineResponse> {
    const url = this.baseUrl.replace(/\/+$/, '') + request.endpoint.replace(/^\/v1/, '');
    // Streams are relayed whole: the upstream is asked for one answer, sent on as one delta.
    const { stream: _stream, stream_options: _options, ...body } = request.body;
    const response = await this.post(url, JSON.stringify(body), request.signal);
    const text = response.text;
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Not JSON: kept as text, so errors show what the engine said.
    }
    if (onDelta && response.status < 300) {
      const choice = (parsed as { choices?: Array<{ message?: { content?: string }; text?: string }> }).choices?.[0];
      const content = choice?.message?.content ?? choice?.text ?? '';
      if (content) onDelta(content);
    }
    const retryAfter = Number(response.headers['retry-after']);
    const requestId = response.headers['x-request-id'];
    return {
      statusCode: response.status,
      requestId: typeof requestId === 'string' ? requestId : `req_${randomUUID().replace(/-/g, '')}`,
      body: parsed,
      ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterMs: Math.min(30_000, retryAfter * 1000) } : {}),
    };
  }

  /**
   * One POST over a kept-alive connection (node:http: a fraction of fetch's cost per request,
   * which a batch of many short requests pays on every line). Rejects when there is no complete
   * answer: no connection, a timeout, a connection closed mid-answer, or `signal` aborted.
   */
  private post(url: string, payload: string, signal: AbortSignal | undefined, retryStale = true): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const finish = (error: Error | undefined, answer?: { status: number; headers: IncomingHttpHeaders; text: string }) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (error) {
          // A kept-alive connection the server had just closed: sent again once on a fresh one.
          const stale = retryStale && req.reusedSocket && (error as NodeJS.ErrnoException).code === 'ECONNRESET' && !signal?.aborted;
          if (stale) this.post(url, payload, signal, false).then(resolve, reject);
          else reject(error);
        } else resolve(answer!);
      };
      const target = new URL(url);
      const req = (target.protocol === 'https:' ? httpsRequest : httpRequest)(
        target,
        {
          method: 'POST',
          agent: this.agent,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(payload),
            ...(this.settings.apiKey ? { authorization: `Bearer ${this.settings.apiKey}` } : {}),
          },
          ...(signal ? { signal } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => finish(undefined, { status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', (error) => finish(error));
          res.on('close', () => {
            if (!settled) finish(new Error('the connection closed before the answer was complete'));
          });
        },
      );
      const timer = setTimeout(() => {
        const error = new Error(`no answer within ${this.settings.timeoutMs} ms`);
        error.name = 'TimeoutError';
        req.destroy(error);
      }, this.settings.timeoutMs);
      req.on('error', (error) => finish(error));
      req.end(payload);
    });
  }

  /** The server's root: its base URL without the /v1 suffix, where the admin endpoints live. */
  private get root(): string {
    return this.baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
  }

  private async admin(path: string, body?: unknown): Promise<void> {
    const response = await fetch(`${this.root}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(this.settings.apiKey ? { authorization: `Bearer ${this.settings.apiKey}` } : {}) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(this.settings.timeoutMs),
    });
    const text = await response.text();
    const answer = (() => {
      try {
        return JSON.parse(text) as { success?: boolean; message?: string };
      } catch {
        return {};
      }
    })();
    if (!response.ok || answer.success === false) throw new Error(`${this.id}: POST ${path} answered ${response.status}: ${answer.message ?? text.slice(0, 200)}`);
  }

  /**
   * Loads new weights from a folder the server can read (shared storage), without a restart.
   * SGLang: POST /update_weights_from_disk. vLLM (VLLM_SERVER_DEV_MODE=1): pause (letting running
   * requests finish), collective_rpc reload_weights, resume — resumed whatever happened.
   */
  async reloadWeights(path: string): Promise<void> {
    if (this.kind === 'sglang') return this.admin('/update_weights_from_disk', { model_path: path });
    if (this.kind === 'vllm') {
      await this.admin('/pause?mode=wait');
      try {
        await this.admin('/collective_rpc', { method: 'reload_weights', kwargs: { weights_path: path } });
      } finally {
        await this.admin('/resume');
      }
      return;
    }
    throw new Error(`${this.id}: a generic OpenAI-compatible server has no weight reload; use kind vllm or sglang`);
  }

  async health(): Promise<boolean> {
    try {
      const response = await fetch(`${this.baseUrl.replace(/\/+$/, '')}/models`, {
        headers: this.settings.apiKey ? { authorization: `Bearer ${this.settings.apiKey}` } : {},
        signal: AbortSignal.timeout(5000),
      });
      await response.arrayBuffer();
      return response.ok;
    } catch {
      return false;
    }
  }
}

interface Slot {
  readonly replica: Replica;
  readonly limit: ConcurrencyLimit;
  waiting: number;
  downUntil: number;
  failures: number;
}

export interface PoolSettings {
  readonly maxAttempts: number;
  readonly backoffMs: number;
  /** How long a failed replica is left out before it is tried again. */
  readonly cooldownMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const transient = (response: EngineResponse) => response.statusCode === 429 || response.statusCode >= 500;

/**
 * The replicas of one model. Each request goes to the healthy replica with the fewest requests
 * in flight or waiting; a replica that gives no answer, or keeps answering 5xx, is left out for a
 * while and health-checked back in. Transient failures are retried on the others with backoff.
 */
export class ReplicaPool implements InferenceEngine {
  readonly description: string;
  private readonly slots: Slot[];

  constructor(
    readonly model: string,
    replicas: ReadonlyArray<{ replica: Replica; concurrency: number }>,
    private readonly settings: PoolSettings,
    private readonly images?: ImageResolver,
  ) {
    if (replicas.length === 0) throw new Error(`model ${model} has no replica`);
    this.slots = replicas.map(({ replica, concurrency }) => ({ replica, limit: new ConcurrencyLimit(concurrency), waiting: 0, downUntil: 0, failures: 0 }));
    this.description = `${model}: ${this.slots.map((slot) => slot.replica.description).join(', ')}`;
  }

  get replicas(): Replica[] {
    return this.slots.map((slot) => slot.replica);
  }

  /** Replicas' load and health, for status reports and tests. */
  state(): Array<{ id: string; inFlight: number; waiting: number; healthy: boolean }> {
    const now = Date.now();
    return this.slots.map((slot) => ({ id: slot.replica.id, inFlight: slot.limit.inFlight, waiting: slot.waiting, healthy: slot.downUntil <= now }));
  }

  private pick(avoid: Set<Slot>): Slot {
    const now = Date.now();
    const healthy = this.slots.filter((slot) => slot.downUntil <= now);
    const fresh = healthy.filter((slot) => !avoid.has(slot));
    const candidates = fresh.length > 0 ? fresh : healthy.length > 0 ? healthy : this.slots;
    return candidates.reduce((best, slot) => (slot.limit.inFlight + slot.waiting < best.limit.inFlight + best.waiting ? slot : best));
  }

  async infer(request: EngineRequest, onDelta?: TextDelta): Promise<EngineResponse> {
    const tried = new Set<Slot>();
    let lastResponse: EngineResponse | undefined;
    let lastError = 'no attempt made';
    for (let attempt = 1; attempt <= this.settings.maxAttempts; attempt++) {
      const slot = this.pick(tried);
      tried.add(slot);
      let retryAfterMs: number | undefined;
      slot.waiting += 1;
      try {
        const response = await slot.limit.run(async () => {
          slot.waiting -= 1;
          if (request.withdraw?.()) throw new RequestWithdrawnError('withdrawn before it was sent');
          // Images are fetched only once the request holds a slot, and again on each attempt:
          // requests waiting for a slot (or backing off) hold no image in memory.
          const body = this.images ? await this.images.resolve(request.body) : request.body;
          return slot.replica.send(body === request.body ? request : { ...request, body }, onDelta);
        });
        if (!transient(response)) {
          slot.failures = 0;
          return response;
        }
        this.failed(slot, false);
        lastResponse = response;
        lastError = `${slot.replica.id} answered ${response.statusCode}`;
        retryAfterMs = (response as { retryAfterMs?: number }).retryAfterMs;
      } catch (error) {
        if (request.signal?.aborted || error instanceof RequestWithdrawnError || error instanceof ImageFetchError) throw error;
        this.failed(slot, true);
        lastError = `${slot.replica.id}: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
      }
      if (attempt < this.settings.maxAttempts) {
        const backoff = Math.min(10_000, this.settings.backoffMs * 2 ** (attempt - 1));
        await sleep(retryAfterMs ?? backoff * (0.5 + Math.random() / 2));
      }
    }
    if (lastResponse) return lastResponse;
    // The message reaches callers (batch error files are readable without a credential): it names
    // no replica, address or connection error. Those go in `detail`, for the logs.
    const model = typeof request.body.model === 'string' ? request.body.model : this.model;
    throw new EngineUnavailableError(`No engine answered for model ${JSON.stringify(model)} after ${this.settings.maxAttempts} attempts`, undefined, lastError);
  }

  private failed(slot: Slot, unreachable: boolean): void {
    slot.failures += 1;
    if (unreachable || slot.failures >= 3) slot.downUntil = Date.now() + this.settings.cooldownMs;
  }

  /** Brings back replicas that answer their health check. */
  async checkHealth(): Promise<void> {
    const now = Date.now();
    await Promise.all(
      this.slots
        .filter((slot) => slot.downUntil > now)
        .map(async (slot) => {
          if (await slot.replica.health()) {
            slot.downUntil = 0;
            slot.failures = 0;
          }
        }),
    );
  }
}

/** Model serve name → its replicas. Batches and /compat/v1 share it. */
export class Fleet implements EngineDirectory {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pools: ReadonlyMap<string, ReplicaPool>,
    /** Serves any model not named in the fleet (ENGINE_BASE_URL). */
    private readonly fallback?: ReplicaPool,
  ) {}

  engineFor(model: string): ReplicaPool | undefined {
    return this.pools.get(model) ?? this.fallback;
  }

  models(): string[] {
    return [...this.pools.keys()];
  }

  /** Models (and the ENGINE_BASE_URL engine, as "*") whose every replica is left out after failing. */
  modelsWithoutHealthyReplica(): string[] {
    const named = [...this.pools].filter(([, pool]) => !pool.state().some((slot) => slot.healthy)).map(([model]) => model);
    return this.fallback && !this.fallback.state().some((slot) => slot.healthy) ? [...named, '*'] : named;
  }

  startHealthChecks(intervalMs: number): void {
    const tick = () => {
      void Promise.all([...this.pools.values(), ...(this.fallback ? [this.fallback] : [])].map((pool) => pool.checkHealth())).finally(() => {
        if (this.timer) this.timer = setTimeout(tick, intervalMs).unref();
      });
    };
    this.timer = setTimeout(tick, intervalMs).unref();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}

