import { createHash, randomUUID } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';

/**
 * A stand-in for an OpenAI-compatible inference server. Real engines (vLLM, SGLang) need GPUs
 * that this project's CI machines do not have; this one answers the same HTTP shapes over a real
 * socket, deterministically, with failures on demand. A request's text steers it:
 *   [fail:400]  answers 400 with an OpenAI error body;   [fail:500]  always answers 500;
 *   [flaky:N]   answers 503 the first N times this exact text is sent, then succeeds;
 *   [slow:MS]   waits MS milliseconds before answering;
 *   [cached:N]  reports N cached prompt tokens;  [reasoning:N]  reports N reasoning tokens.
 */
export class FakeEngine {
  private server: Server | undefined;
  private flakyCounts = new Map<string, number>();
  /** Calls to the admin endpoints (weight reload), in order. */
  readonly adminCalls: Array<{ path: string; body: string }> = [];
  /** The traceparent header of each inference request received, in order (undefined when absent). */
  readonly traceparents: Array<string | undefined> = [];
  /** The text of each inference request (its messages' contents joined by spaces), in arrival order. */
  readonly texts: string[] = [];
  /** The body of each inference request as it came over the wire, in arrival order. */
  readonly payloads: string[] = [];
  /** Requests received, per path. */
  readonly received = new Map<string, number>();
  inFlight = 0;
  maxInFlight = 0;
  /** Added to every answer. */
  latencyMs = 0;
  /**
   * A reload failure to play (a real engine's known ones): after a weight reload to any folder but
   * `goodWeights`, inference answers 503 (left paused), a body that is no completion (garbled), or
   * nothing (hangs), until a reload to `goodWeights` puts it right.
   */
  reloadFault: { fault: 'paused' | 'garbled' | 'hangs'; goodWeights: string } | undefined;
  private broken: 'paused' | 'garbled' | 'hangs' | undefined;
  url = '';

  /** Listens on `host` (loopback by default) and a free port. */
  async start(host = '127.0.0.1'): Promise<string> {
    this.server = createServer((request, response) => {
      void this.handle(request, response);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, host, resolve));
    const address = this.server.address();
    this.url = `http://${host}:${typeof address === 'object' && address ? address.port : 0}/v1`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  get total(): number {
    return [...this.received.values()].reduce((sum, count) => sum + count, 0);
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const path = (request.url ?? '').replace(/\?.*$/, '');
    if (request.method === 'GET' && path === '/metrics') {
      // No load gauges here: read by default from vllm and sglang replicas, whose capacity is
      // then learned from throughput alone.
      response.writeHead(404).end();
      return;
    }
    if (!path.startsWith('/v1/')) {
      // The weight-reload endpoints of SGLang and vLLM, answered as they answer them.
      const adminBody = Buffer.concat(chunks).toString();
      this.adminCalls.push({ path: request.url ?? '', body: adminBody });
      const weights = /"(?:model_path|weights_path)":"([^"]+)"/.exec(adminBody)?.[1];
      if (weights && this.reloadFault) this.broken = weights === this.reloadFault.goodWeights ? undefined : this.reloadFault.fault;
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ success: true, message: 'ok' }));
      return;
    }
    this.received.set(path, (this.received.get(path) ?? 0) + 1);
    const traceparent = request.headers.traceparent;
    this.traceparents.push(typeof traceparent === 'string' ? traceparent : undefined);
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.broken === 'paused') {
        response.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'the engine is paused', type: 'server_error', param: null, code: null } }));
        return;
      }
      if (this.broken === 'garbled') {
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: '\u0000\u0007 ###' }));
        return;
      }
      if (this.broken === 'hangs') {
        await new Promise<void>((resolve) => request.socket.once('close', () => resolve()));
        return;
      }
      const payload = Buffer.concat(chunks).toString();
      this.payloads.push(payload);
      const body = JSON.parse(payload || '{}') as Record<string, unknown>;
      const text = textOf(body);
      this.texts.push(text);
      const slow = /\[slow:(\d+)\]/.exec(text);
      const delay = this.latencyMs + (slow ? Number(slow[1]) : 0);
      if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
      const answer = this.answer(path, body, text);
      response.writeHead(answer.status, { 'content-type': 'application/json', 'x-request-id': `req_${randomUUID().replace(/-/g, '')}` });
      response.end(JSON.stringify(answer.body));
    } finally {
      this.inFlight -= 1;
    }
  }

  private answer(path: string, body: Record<string, unknown>, text: string): { status: number; body: unknown } {
    if (text.includes('[fail:400]')) {
      return { status: 400, body: { error: { message: 'This request was refused by the engine', type: 'invalid_request_error', param: 'messages', code: 'invalid_prompt' } } };
    }
    if (text.includes('[fail:500]')) return { status: 500, body: { error: { message: 'engine crashed', type: 'server_error', param: null, code: null } } };
    const flaky = /\[flaky:(\d+)\]/.exec(text);
    if (flaky) {
      const seen = this.flakyCounts.get(text) ?? 0;
      this.flakyCounts.set(text, seen + 1);
      if (seen < Number(flaky[1])) return { status: 503, body: { error: { message: 'busy, try again', type: 'server_error', param: null, code: null } } };
    }
    const model = String(body.model ?? 'unknown');
    const words = (value: string) => value.split(/\s+/).filter(Boolean).length;
    const prompt = words(text);
    const reply = `echo: ${text}`;
    const cached = /\[cached:(\d+)\]/.exec(text);
    const reasoning = /\[reasoning:(\d+)\]/.exec(text);
    const usage = {
      prompt_tokens: prompt,
      completion_tokens: words(reply),
      total_tokens: prompt + words(reply),
      ...(cached ? { prompt_tokens_details: { cached_tokens: Number(cached[1]) } } : {}),
      ...(reasoning ? { completion_tokens_details: { reasoning_tokens: Number(reasoning[1]) } } : {}),
    };
    const created = 1_700_000_000;
    switch (path) {
      case '/v1/models':
        return { status: 200, body: { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'fake' }] } };
      case '/v1/chat/completions':
        return {
          status: 200,
          body: { id: `chatcmpl-${hash(text)}`, object: 'chat.completion', created, model, choices: [{ index: 0, message: { role: 'assistant', content: reply }, finish_reason: 'stop' }], usage },
        };
      case '/v1/completions':
        return { status: 200, body: { id: `cmpl-${hash(text)}`, object: 'text_completion', created, model, choices: [{ index: 0, text: reply, finish_reason: 'stop' }], usage } };
      case '/v1/embeddings': {
        const inputs = Array.isArray(body.input) ? (body.input as unknown[]) : [body.input];
        return {
          status: 200,
          body: {
            object: 'list',
            model,
            data: inputs.map((input, index) => ({ object: 'embedding', index, embedding: vector(String(input)) })),
            usage: { prompt_tokens: inputs.map((input) => words(String(input))).reduce((a, b) => a + b, 0), total_tokens: inputs.map((input) => words(String(input))).reduce((a, b) => a + b, 0) },
          },
        };
      }
      case '/v1/responses':
        return {
          status: 200,
          body: {
            id: `resp_${hash(text)}`,
            object: 'response',
            created_at: created,
            model,
            status: 'completed',
            output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: reply }] }],
            usage: { input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens, total_tokens: usage.total_tokens },
          },
        };
      default:
        return { status: 404, body: { error: { message: `no route ${path}`, type: 'invalid_request_error', param: null, code: null } } };
    }
  }
}

function textOf(body: Record<string, unknown>): string {
  if (Array.isArray(body.messages)) {
    return (body.messages as Array<{ content: unknown }>)
      .map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content)))
      .join(' ');
  }
  if (typeof body.prompt === 'string') return body.prompt;
  if (typeof body.input === 'string') return body.input;
  if (Array.isArray(body.input)) return body.input.map(String).join(' ');
  return '';
}

const hash = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

function vector(text: string): number[] {
  const digest = createHash('sha256').update(text).digest();
  return [0, 1, 2, 3].map((index) => digest[index]! / 255);
}
