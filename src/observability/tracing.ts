import { createHash } from 'node:crypto';

export type SpanAttributes = Record<string, string | number | boolean>;

/** One unit of work being timed; ended once. */
export interface TraceSpan {
  setAttributes(attributes: SpanAttributes): void;
  /** Marks the span as failed, with a message that names no secret. */
  fail(message: string): void;
  end(): void;
  /** The W3C traceparent header value for a request this span makes (undefined when not traced). */
  readonly traceparent: string | undefined;
}

export interface SpanOptions {
  readonly attributes?: SpanAttributes;
  /** client: a call to another service (an engine); internal otherwise. */
  readonly kind?: 'internal' | 'client' | 'server';
  /** The span this one is part of; without it, the batch's root span. */
  readonly parent?: TraceSpan;
}

/**
 * Where spans go. Every span of a batch is in the batch's own trace, whatever process records it:
 * the trace id and the root span id are derived from the batch id (batchTraceIds), so the
 * validator, the runner and the finalizer need not pass anything to each other.
 */
export interface Tracing {
  /** A span in the batch's trace, under its root span unless a parent is given. */
  startBatchSpan(batchId: string, name: string, options?: SpanOptions): TraceSpan;
  /**
   * A span already over (an HTTP request, timed by its hooks). With a batch id it is that batch's
   * root span: the request that created the batch.
   */
  recordSpan(name: string, startedAtMs: number, options: { readonly attributes?: SpanAttributes; readonly kind?: SpanOptions['kind']; readonly failed?: boolean; readonly rootOfBatch?: string }): void;
  /** Sends what is buffered; stops taking spans. */
  shutdown(): Promise<void>;
}

/** A batch's trace id (32 hex digits) and its root span's id (16 hex digits). */
export function batchTraceIds(batchId: string): { traceId: string; rootSpanId: string } {
  const digest = createHash('sha256').update(batchId).digest('hex');
  return { traceId: digest.slice(0, 32), rootSpanId: digest.slice(32, 48) };
}

const NO_SPAN: TraceSpan = { setAttributes: () => undefined, fail: () => undefined, end: () => undefined, traceparent: undefined };

/** Tracing when OTEL_EXPORTER_OTLP_ENDPOINT is unset: nothing recorded, nothing loaded. */
export const NO_TRACING: Tracing = {
  startBatchSpan: () => NO_SPAN,
  recordSpan: () => undefined,
  shutdown: async () => undefined,
};

/** GenAI semantic conventions' operation name for an OpenAI endpoint. */
export function genAiOperation(endpoint: string): string {
  if (endpoint.endsWith('/chat/completions')) return 'chat';
  if (endpoint.endsWith('/completions')) return 'text_completion';
  if (endpoint.endsWith('/embeddings')) return 'embeddings';
  return endpoint.replace(/^\/v1\//, '');
}
