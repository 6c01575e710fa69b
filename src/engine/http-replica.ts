import { randomUUID } from 'node:crypto';
import { Agent as HttpAgent, type IncomingHttpHeaders, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { TextDelta } from './builtin/builtin-engine.js';
import type { EngineRequest, EngineResponse } from './engine.js';
import { type EngineLoad, engineLoadFrom } from './engine-load-metrics.js';
import { enginePriority } from './engine-priority.js';
import type { Replica, ReplicaKind, StagedWeights, Urgency } from './replica.js';

export interface HttpReplicaSettings {
  readonly apiKey?: string;
  readonly timeoutMs: number;
  /**
   * Send each request's urgency in the server's own priority field (vLLM started with
   * --scheduling-policy priority; SGLang with priority scheduling). 'low_values_first': an SGLang
   * server started with --schedule-low-priority-values-first.
   */
  readonly priorityHints?: boolean | 'low_values_first';
  /** The server's Prometheus metrics (vLLM, SGLang): its queue and KV-cache use feed the learned concurrency. */
  readonly metricsUrl?: string;
}

/** An OpenAI-compatible HTTP server: vLLM, SGLang, llama.cpp, OpenAI. */
export class HttpReplica implements Replica {
  readonly description: string;
  readonly weightsInProcess = false;
  readonly servedManifest = undefined;
  private readonly agent: HttpAgent;
  constructor(
    readonly id: string,
    readonly kind: Exclude<ReplicaKind, 'builtin'>,
    /** The server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1. */
    readonly baseUrl: string,
    private readonly settings: HttpReplicaSettings,
  ) {
    this.description = `${kind} ${baseUrl}`;
    this.agent = baseUrl.startsWith('https:') ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
  }

  /** A server knows its own weights; Spool names it by its address. */
  get servedCheckpoint(): string {
    return this.baseUrl;
  }

  priorityFields(urgency: Urgency, now: number): Record<string, unknown> | undefined {
    if (!this.settings.priorityHints) return undefined;
    return enginePriority(this.kind, urgency, now, { lowValuesFirst: this.settings.priorityHints === 'low_values_first' });
  }

  /** The server's load gauges (FLEET_FILE metrics_url), or undefined when it has none or they cannot be read. */
  async load(): Promise<EngineLoad | undefined> {
    if (!this.settings.metricsUrl) return undefined;
    try {
      const response = await fetch(this.settings.metricsUrl, { signal: AbortSignal.timeout(2000) });
      if (!response.ok) return undefined;
      return engineLoadFrom(await response.text());
    } catch {
      return undefined;
    }
  }

  reload(weights: StagedWeights): Promise<void> {
    return this.reloadWeights(weights.path);
  }

  async send(request: EngineRequest, onDelta?: TextDelta): Promise<EngineResponse> {
    const url = this.baseUrl.replace(/\/+$/, '') + request.endpoint.replace(/^\/v1/, '');
    // Streams are relayed whole: the upstream is asked for one answer, sent on as one delta.
    const { stream: _stream, stream_options: _options, ...body } = request.body;
    const response = await this.post(url, JSON.stringify(body), request.signal, request.traceparent);
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
  private post(url: string, payload: string, signal: AbortSignal | undefined, traceparent: string | undefined, retryStale = true): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const finish = (error: Error | undefined, answer?: { status: number; headers: IncomingHttpHeaders; text: string }) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (error) {
          // A kept-alive connection the server had just closed: sent again once on a fresh one.
          const stale = retryStale && req.reusedSocket && (error as NodeJS.ErrnoException).code === 'ECONNRESET' && !signal?.aborted;
          if (stale) this.post(url, payload, signal, traceparent, false).then(resolve, reject);
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
            ...(traceparent ? { traceparent } : {}),
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

