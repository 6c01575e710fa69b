import { createHash } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { FakeEngine } from './support/fake-engine.js';
import { chatLine, createBatch, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { startTestService } from './support/service.js';

const JOB = { job_id: 'Traced-Job', model: 'tiny-chat', use_case: 'tracing', sla: '24h', price_1m_tokens: 1 };

interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status?: { code?: number };
}

/** An OTLP/HTTP collector on loopback: keeps every span of every JSON export it is sent. */
class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly serviceNames = new Set<string>();
  requests = 0;
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        this.requests++;
        if (request.url === '/v1/traces' && request.headers['content-type']?.startsWith('application/json')) {
          const body = JSON.parse(Buffer.concat(chunks).toString()) as { resourceSpans: Array<{ resource: { attributes: Attribute[] }; scopeSpans: Array<{ spans: Array<Omit<ReceivedSpan, 'attributes'> & { attributes?: Attribute[] }> }> }> };
          for (const resourceSpans of body.resourceSpans) {
            const name = attributesOf(resourceSpans.resource.attributes)['service.name'];
            if (typeof name === 'string') this.serviceNames.add(name);
            for (const scope of resourceSpans.scopeSpans) for (const span of scope.spans) this.spans.push({ ...span, attributes: attributesOf(span.attributes ?? []) });
          }
        }
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    this.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

type Attribute = { key: string; value: { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number } };

function attributesOf(attributes: Attribute[]): Record<string, unknown> {
  return Object.fromEntries(attributes.map(({ key, value }) => [key, value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : (value.boolValue ?? value.doubleValue))]));
}

async function runBatch(serviceUrl: string, lines: string[]) {
  const client = new OpenAI({ baseURL: `${serviceUrl}/v1`, apiKey: 'placeholder', maxRetries: 0 });
  expect((await reserveJob(serviceUrl, JOB)).status).toBe(201);
  const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'traced.jsonl'), purpose: 'batch' });
  const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
  const done = await waitForStatus(client, created.id, ['completed', 'failed']);
  expect(done.status).toBe('completed');
  return created.id;
}

describe('OpenTelemetry traces over OTLP', () => {
  const engine = new FakeEngine();
  const receiver = new OtlpReceiver();
  beforeAll(async () => {
    await engine.start();
    await receiver.start();
  });
  afterAll(async () => {
    await engine.stop();
    await receiver.stop();
  });

  it("records one trace per batch: its creating request, validation, each chunk, each line's engine call, finalizing", async () => {
    const service = await startTestService({ env: { ENGINE_BASE_URL: engine.url, BATCH_CHUNK_LINES: '2', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'spool-under-test' } });
    const sentBefore = engine.traceparents.length;
    let batchId: string;
    try {
      batchId = await runBatch(service.url, Array.from({ length: 5 }, (_, index) => chatLine(`line-${index}`, `hello ${index}`)));
    } finally {
      await service.close();
    }
    // The trace id anyone can compute from the batch id alone.
    const traceId = createHash('sha256').update(batchId).digest('hex').slice(0, 32);
    const spans = receiver.spans.filter((span) => span.traceId === traceId);
    expect(receiver.serviceNames).toContain('spool-under-test');

    const roots = spans.filter((span) => span.name === 'POST /v1/batches');
    expect(roots).toHaveLength(1);
    const root = roots[0]!;
    expect(root.parentSpanId ?? '').toBe('');
    expect(root.attributes['http.response.status_code']).toBe(200);

    const byName = (name: string) => spans.filter((span) => span.name === name);
    const [validation] = byName('validate batch');
    expect(byName('validate batch')).toHaveLength(1);
    expect(validation!.parentSpanId).toBe(root.spanId);
    expect(validation!.attributes['spool.batch.lines']).toBe(5);
    expect(validation!.attributes['spool.batch.chunks']).toBe(3);

    const chunks = byName('run chunk');
    expect(chunks.map((span) => span.attributes['spool.batch.chunk']).sort()).toEqual([0, 1, 2]);
    for (const chunk of chunks) expect(chunk.parentSpanId).toBe(root.spanId);

    const calls = byName('chat tiny-chat');
    expect(calls.map((span) => span.attributes['spool.batch.line']).sort()).toEqual([1, 2, 3, 4, 5]);
    const chunkIds = new Map(chunks.map((span) => [span.spanId, span.attributes['spool.batch.chunk']]));
    for (const call of calls) {
      // Lines 1-2 in chunk 0, 3-4 in chunk 1, 5 in chunk 2.
      expect(chunkIds.get(call.parentSpanId!)).toBe(Math.floor(((call.attributes['spool.batch.line'] as number) - 1) / 2));
      expect(call.kind).toBe(3); // SPAN_KIND_CLIENT
      expect(call.attributes['gen_ai.operation.name']).toBe('chat');
      expect(call.attributes['gen_ai.request.model']).toBe('tiny-chat');
      expect(call.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
      expect(call.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
      expect(String(call.attributes['gen_ai.response.id'])).toMatch(/^chatcmpl-/);
    }

    const [finalizing] = byName('finalize batch');
    expect(byName('finalize batch')).toHaveLength(1);
    expect(finalizing!.parentSpanId).toBe(root.spanId);
    expect(finalizing!.attributes['spool.batch.status']).toBe('completed');

    // The engine was told each call's trace context: the batch's trace, the call's span.
    const sent = engine.traceparents.slice(sentBefore);
    expect(sent).toHaveLength(5);
    expect(sent.map((header) => header?.split('-')[2]).sort()).toEqual(calls.map((call) => call.spanId).sort());
    for (const header of sent) expect(header).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  });

  it('records nothing and sends no trace context when OTEL_EXPORTER_OTLP_ENDPOINT is unset', async () => {
    const requestsBefore = receiver.requests;
    const sentBefore = engine.traceparents.length;
    const service = await startTestService({ env: { ENGINE_BASE_URL: engine.url } });
    try {
      await runBatch(service.url, [chatLine('quiet', 'no traces')]);
    } finally {
      await service.close();
    }
    expect(receiver.requests).toBe(requestsBefore);
    expect(engine.traceparents.slice(sentBefore)).toEqual([undefined]);
  });

  it('refuses an OTEL_EXPORTER_OTLP_ENDPOINT that is not an http(s) URL, naming it', () => {
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, '/srv')).toThrow(ConfigError);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, '/srv')).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT must be an http\(s\) URL/);
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, '/srv')).toMatchObject({ otlpEndpoint: 'http://collector:4318', serviceName: 'spool' });
  });
});
