import { randomUUID } from 'node:crypto';
import type { TextDelta } from './builtin/builtin-engine.js';
import type { EngineRequest } from './engine.js';
import { type ExchangeAnswer, type ExchangeListener, engineIo } from './io/engine-io.js';
import { HTTP_ENGINE_KINDS, type HttpEngineKind, type HttpEngineKindName, kindsThatReload } from './engine-kinds.js';
import { newEngineRequestId } from '../platform/ids.js';
import { JsonText } from '../domain/json-text.js';
import { type EngineLoad, engineLoadFrom } from './engine-load-metrics.js';
import { enginePriority } from './scheduling/engine-priority.js';
import { streamAnswer } from './streamed-answer.js';
import type { Replica, ReplicaListener, ReplicaResponse, StagedWeights, Urgency } from './replica.js';

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

/** An OpenAI-compatible HTTP server: vLLM, SGLang, llama.cpp, OpenAI; what its kind does differently is in engine-kinds.ts. */
export class HttpReplica implements Replica {
  readonly description: string;
  readonly weightsInProcess = false;
  readonly holdsRequests = true;
  readonly capacityKnown = false;
  readonly servedManifest = undefined;
  /** The kept-alive connections this replica's requests go out on, in the engine I/O thread. */
  private readonly agent: string;
  private readonly base: string;
  private readonly headers: Record<string, string>;
  constructor(
    readonly id: string,
    readonly kind: HttpEngineKindName,
    /** The server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1. */
    readonly baseUrl: string,
    private readonly settings: HttpReplicaSettings,
  ) {
    this.description = `${kind} ${baseUrl}`;
    this.agent = `${id} ${randomUUID()}`;
    this.base = baseUrl.replace(/\/+$/, '');
    this.headers = { 'content-type': 'application/json', ...(settings.apiKey ? { authorization: `Bearer ${settings.apiKey}` } : {}) };
    engineIo.start();
  }

  /** Each endpoint's URL on this server, made once (every batch line is sent to one). */
  private readonly urls = new Map<string, string>();

  private urlOf(endpoint: string): string {
    let url = this.urls.get(endpoint);
    if (url === undefined) this.urls.set(endpoint, (url = this.base + endpoint.replace(/^\/v1/, '')));
    return url;
  }

  /** Where the weights of the last reload came from; the server's address until one. */
  private reloaded: StagedWeights | undefined;

  /** A server knows its own weights; Spool names them by where a reload took them from, else by its address. */
  get servedCheckpoint(): string {
    return this.reloaded?.location ?? this.baseUrl;
  }

  get servedSyncId(): string | undefined {
    return this.reloaded?.syncId;
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

  async reload(weights: StagedWeights): Promise<void> {
    await this.reloadWeights(weights.path);
    this.reloaded = weights;
  }

  send(request: EngineRequest, onDelta?: TextDelta, ahead?: { readonly limit: number }): Promise<ReplicaResponse> {
    if (onDelta && STREAMED_ENDPOINTS.has(request.endpoint)) return this.stream(request, onDelta);
    return new Promise<ReplicaResponse>((resolve, reject) => this.sendTo(request, onDelta, ahead, { answered: resolve, failed: reject }));
  }

  sendTo(request: EngineRequest, onDelta: TextDelta | undefined, ahead: { readonly limit: number } | undefined, listener: ReplicaListener): void {
    if (onDelta && STREAMED_ENDPOINTS.has(request.endpoint)) {
      this.stream(request, onDelta).then(
        (response) => listener.answered(response),
        (error: unknown) => listener.failed(error),
      );
      return;
    }
    let payload: string;
    try {
      // Anything else is asked for whole (a stream asked for elsewhere is relayed as one piece).
      // Copied without them only where they are there: every batch line passes here.
      // A batch line's body as its input holds it, where it may go as written (EngineRequest.bodyText).
      payload = request.bodyText ?? JSON.stringify('stream' in request.body || 'stream_options' in request.body ? withoutStreaming(request.body) : request.body);
    } catch (error) {
      return listener.failed(error);
    }
    const headers = request.traceparent ? { ...this.headers, traceparent: request.traceparent } : this.headers;
    const waitable = (request.serviceClass ?? 'interactive') !== 'interactive';
    const options = {
      signal: request.signal,
      // Interactive requests are never held: the scheduler lets them past the learned limit (up
      // to ENGINE_CONCURRENCY), and they go out at once.
      gate: ahead && waitable ? { limit: ahead.limit, urgent: false } : undefined,
      // Batch lines sent at once (nothing held ahead yet) still fill the slots held ones wait for.
      counted: waitable,
      withdraw: request.withdraw,
      // A batch line's answer is only written out (its outcome, its output line): the thread reads it.
      digest: waitable && !onDelta,
    };
    engineIo.postTo(this.agent, this.urlOf(request.endpoint), headers, payload, this.settings.timeoutMs, options, new HttpAnswer(listener, onDelta));
  }

  /**
   * A streamed chat or completion (an interactive request with `stream: true`), relayed event by
   * event from this process, not the engine I/O thread, as the client's socket takes them. Its
   * slot is held until the last byte: send() resolves only then.
   */
  private async stream(request: EngineRequest, onDelta: TextDelta): Promise<ReplicaResponse> {
    const headers = request.traceparent ? { ...this.headers, traceparent: request.traceparent } : this.headers;
    const timeout = AbortSignal.timeout(this.settings.timeoutMs);
    const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
    const url = new URL(this.base + request.endpoint.replace(/^\/v1/, ''));
    const answer = await streamAnswer(url, headers, request.body, request.endpoint === '/v1/chat/completions', signal, onDelta);
    return { statusCode: answer.statusCode, requestId: answer.requestId ?? newEngineRequestId(), body: answer.body };
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

  /** Loads new weights from a folder the server can read (shared storage), without a restart, as its kind does. */
  async reloadWeights(path: string): Promise<void> {
    const { server, reload }: HttpEngineKind = HTTP_ENGINE_KINDS[this.kind];
    if (!reload) throw new Error(`${this.id}: a ${server} has no weight reload; use kind ${kindsThatReload().join(' or ')}`);
    return reload((adminPath, body) => this.admin(adminPath, body), path);
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

/** An exchange's answer as the replica's response, told to its listener. */
class HttpAnswer implements ExchangeListener {
  constructor(
    private readonly listener: ReplicaListener,
    private readonly onDelta: TextDelta | undefined,
  ) {}

  answered(answer: ExchangeAnswer): void {
    let response: ReplicaResponse;
    try {
      response = responseOf(answer, this.onDelta);
    } catch (error) {
      return this.listener.failed(error);
    }
    this.listener.answered(response);
  }

  failed(error: Error): void {
    this.listener.failed(error);
  }
}

/** A whole answer as the replica's response: one object (every batch line's is made here), its body read by the thread or parsed here. */
function responseOf(answer: ExchangeAnswer, onDelta: TextDelta | undefined): ReplicaResponse {
  const retryAfter = Number(answer.retryAfter);
  const retryAfterMs = Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(30_000, retryAfter * 1000) : undefined;
  const digest = answer.digest;
  return {
    statusCode: answer.status,
    requestId: answer.requestId ?? newEngineRequestId(),
    engineLatencyMs: answer.latencyMs,
    sent: answer.sent,
    retryAfterMs,
    body: digest ? new JsonText(digest.json) : parsedAnswer(answer.text, answer.status, onDelta),
    bodyFields: digest ? { usage: digest.usage, id: digest.id, model: digest.model } : undefined,
    // Set by the pool once it knows which replica answered: here so that every response has one shape.
    servedBy: undefined,
  };
}

/** The endpoints a client may stream from: OpenAI's chat and completions. */
const STREAMED_ENDPOINTS = new Set(['/v1/chat/completions', '/v1/completions']);

function withoutStreaming(body: Record<string, unknown>): Record<string, unknown> {
  const { stream: _stream, stream_options: _options, ...rest } = body;
  return rest;
}

/** A whole answer's body: parsed where it is JSON, kept as text where not (so errors show what the engine said); its content told to onDelta. */
function parsedAnswer(text: string, status: number, onDelta: TextDelta | undefined): unknown {
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON: kept as text.
  }
  if (onDelta && status < 300) {
    const choice = (parsed as { choices?: Array<{ message?: { content?: string }; text?: string }> }).choices?.[0];
    const content = choice?.message?.content ?? choice?.text ?? '';
    if (content) onDelta(content);
  }
  return parsed;
}
