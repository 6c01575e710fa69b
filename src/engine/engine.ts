// The engine port: something that answers OpenAI-compatible inference requests. The fleet's
// replica pools (fleet.ts) implement it, each balancing built-in CPU replicas (builtin/) or
// OpenAI-compatible HTTP servers (vLLM, SGLang, llama.cpp, OpenAI itself).
import { type ServedBy, type Usage, ZERO_USAGE } from '../domain/line-outcome.js';
import type { ServiceClass } from './scheduling/urgency.js';

export interface EngineRequest {
  /** The OpenAI path, e.g. /v1/chat/completions. */
  readonly endpoint: string;
  readonly body: Record<string, unknown>;
  /**
   * The body's JSON text, where `body` is this text parsed and may go to an engine as written: it
   * asks for no stream (`stream`, `stream_options`). A batch line's body as its input holds it
   * (sending it saves parsing it and writing it out again). A request made from this one with
   * another body leaves it out (withBody).
   */
  readonly bodyText?: string | undefined;
  readonly signal?: AbortSignal;
  /**
   * Asked once the engine admits the request, just before it goes out: true withdraws it
   * (RequestWithdrawnError). A request may wait a while for a free slot; the world may change.
   */
  readonly withdraw?: () => boolean;
  /** interactive (the default): someone waits on the answer; batch: a batch line; background: a job with sla none. */
  readonly serviceClass?: ServiceClass;
  /** Batch work: epoch ms it is due by (its batch's expires_at). */
  readonly deadline?: number;
  /** Batch and background work: equally urgent keys (jobs) share capacity fairly. */
  readonly fairnessKey?: string;
  /** The group the key belongs to (its batch's account): groups share capacity first, then their keys. */
  readonly fairnessGroup?: string;
  /** W3C trace context of the call, sent on to an engine that takes HTTP requests. */
  readonly traceparent?: string;
}

/**
 * The request as it goes out with `body` instead of its own (an image fetched into it) and
 * `fields` added (an engine's priority hint); the request itself where there is neither, its
 * body read only then (a batch line's may go out as its input's text, never parsed). A copy
 * leaves `bodyText` out: that text is the request's own body, not the copy's.
 */
export function withBody(request: EngineRequest, body: Record<string, unknown> | undefined, fields: Record<string, unknown> | undefined): EngineRequest {
  const replaced = body !== undefined && body !== request.body ? body : undefined;
  if (!replaced && !fields) return request;
  return { ...request, body: fields ? { ...(replaced ?? request.body), ...fields } : replaced!, bodyText: undefined };
}

export class RequestWithdrawnError extends Error {
  override readonly name = 'RequestWithdrawnError';
}

/** An answer from the engine: success or an error status, with its body as sent. */
export interface EngineResponse {
  readonly statusCode: number;
  readonly requestId: string;
  /** Parsed JSON; the text where it is not JSON; a JsonText where the exchange read it off the main loop (a batch line's). */
  readonly body: unknown;
  /** With a JsonText body: the fields of it that are read here (the rest is only written out). */
  readonly bodyFields?: { readonly usage: unknown; readonly id: unknown; readonly model: unknown };
  /** The replica that answered and the weights it served (set by the pool). */
  readonly servedBy?: ServedBy;
}

/**
 * A streamed answer broke off after some of its text reached the caller: not tried again (the
 * caller would see part of an answer twice); the caller's stream ends with the error.
 */
export class StreamCutError extends Error {
  override readonly name = 'StreamCutError';
}

/** No answer could be had (connection refused, timeout, upstream kept failing). */
export class EngineUnavailableError extends Error {
  override readonly name = 'EngineUnavailableError';
  constructor(
    message: string,
    readonly lastResponse?: EngineResponse,
    /** What went wrong, naming replicas and addresses: for the logs, never for callers. */
    readonly detail?: string,
  ) {
    super(message);
  }
}

export interface InferenceEngine {
  readonly description: string;
  infer(request: EngineRequest): Promise<EngineResponse>;
  /**
   * infer() for a caller that listens rather than awaits, where the engine offers it: told once,
   * answered or failed (possibly before it returns). Batch lines go this way: a promise and its
   * continuations a line, at each layer, were much of what a line holds while it waits and runs.
   */
  submit?(request: EngineRequest, listener: EngineListener): void;
}

/** Hears how a request submitted to an engine ended (InferenceEngine.submit): once. */
export interface EngineListener {
  answered(response: EngineResponse): void;
  failed(error: unknown): void;
}

/** Which engine serves a model; undefined when none does. */
export interface EngineDirectory {
  engineFor(model: string): InferenceEngine | undefined;
}

/** The usage an OpenAI-compatible response reports (chat, completions, embeddings, responses). */
export function usageOf(body: unknown): Usage {
  const usage = (body as { usage?: Record<string, unknown> } | null)?.usage;
  if (!usage || typeof usage !== 'object') return ZERO_USAGE;
  // The Responses API names them input_tokens and output_tokens.
  const prompt = tokenCount(usage.prompt_tokens ?? usage.input_tokens);
  const completion = tokenCount(usage.completion_tokens ?? usage.output_tokens);
  const total = tokenCount(usage.total_tokens) || prompt + completion;
  // Chat and completions say prompt_tokens_details / completion_tokens_details; the Responses API input_/output_.
  const cached = tokenDetail(usage.prompt_tokens_details ?? usage.input_tokens_details, 'cached_tokens');
  const reasoning = tokenDetail(usage.completion_tokens_details ?? usage.output_tokens_details, 'reasoning_tokens');
  // Kept only when reported, so the outcome events of engines that do not report them stay as they were
  // (added after, not spread in: every answered batch line's usage is made here).
  const counted: { -readonly [K in keyof Usage]: Usage[K] } = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total };
  if (cached !== undefined) counted.cached_tokens = cached;
  if (reasoning !== undefined) counted.reasoning_tokens = reasoning;
  return counted;
}

const tokenCount = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.floor(value) : 0);

function tokenDetail(details: unknown, name: string): number | undefined {
  const value = (details as Record<string, unknown> | null | undefined)?.[name];
  return typeof value === 'number' ? tokenCount(value) : undefined;
}
