import { type Context, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, TraceFlags, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, type IdGenerator, RandomIdGenerator, type SpanExporter, TracerProvider } from '@opentelemetry/sdk-trace';
import { type SpanOptions, type TraceSpan, type Tracing, batchTraceIds } from './tracing.js';

const KINDS = { internal: SpanKind.INTERNAL, client: SpanKind.CLIENT, server: SpanKind.SERVER } as const;

/**
 * Random ids, except for the one span whose ids are given just before it starts: a batch's root
 * span, whose ids every process derives from the batch id. Starting a span is synchronous, so the
 * given ids cannot reach another span.
 */
class BatchRootIds implements IdGenerator {
  private readonly random = new RandomIdGenerator();
  given: { traceId: string; rootSpanId: string } | undefined;
  generateTraceId(): string {
    return this.given?.traceId ?? this.random.generateTraceId();
  }
  generateSpanId(): string {
    return this.given?.rootSpanId ?? this.random.generateSpanId();
  }
}

class OtlpSpan implements TraceSpan {
  constructor(readonly span: Span) {}
  setAttributes(attributes: Record<string, string | number | boolean>): void {
    this.span.setAttributes(attributes);
  }
  fail(message: string): void {
    this.span.setStatus({ code: SpanStatusCode.ERROR, message });
  }
  end(): void {
    this.span.end();
  }
  get traceparent(): string {
    const { traceId, spanId } = this.span.spanContext();
    return `00-${traceId}-${spanId}-01`;
  }
}

/** Tracing to an OTLP/HTTP collector (JSON to `${endpoint}/v1/traces`), spans sent in batches. */
export class OtlpTracing implements Tracing {
  private readonly ids = new BatchRootIds();
  private readonly provider: TracerProvider;
  private readonly tracer;

  constructor(settings: { endpoint: string; serviceName: string; roles: readonly string[]; exporter?: SpanExporter }) {
    const exporter = settings.exporter ?? (new OTLPTraceExporter({ url: `${settings.endpoint.replace(/\/+$/, '')}/v1/traces` }) as unknown as SpanExporter);
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': settings.serviceName, 'spool.roles': settings.roles.join(',') }),
      idGenerator: this.ids,
      spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: 1000 })],
    });
    this.tracer = this.provider.getTracer('spool');
  }

  startBatchSpan(batchId: string, name: string, options: SpanOptions = {}): TraceSpan {
    const parent = options.parent instanceof OtlpSpan ? trace.setSpan(ROOT_CONTEXT, options.parent.span) : batchRootContext(batchId);
    return new OtlpSpan(this.tracer.startSpan(name, { kind: KINDS[options.kind ?? 'internal'], ...(options.attributes ? { attributes: options.attributes } : {}) }, parent));
  }

  recordSpan(name: string, startedAtMs: number, options: Parameters<Tracing['recordSpan']>[2]): void {
    this.ids.given = options.rootOfBatch === undefined ? undefined : batchTraceIds(options.rootOfBatch);
    let span: Span;
    try {
      span = this.tracer.startSpan(name, { kind: KINDS[options.kind ?? 'internal'], startTime: startedAtMs, root: true, ...(options.attributes ? { attributes: options.attributes } : {}) }, ROOT_CONTEXT);
    } finally {
      this.ids.given = undefined;
    }
    if (options.failed) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }
}

/** The batch's root span as a parent, whichever process recorded it (or will). */
function batchRootContext(batchId: string): Context {
  const { traceId, rootSpanId } = batchTraceIds(batchId);
  return trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: rootSpanId, traceFlags: TraceFlags.SAMPLED, isRemote: true });
}
