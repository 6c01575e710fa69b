import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { EngineUnavailableError } from '../../engine/engine.js';
import type { Fleet } from '../../engine/fleet.js';
import { ImageFetchError } from '../../engine/images/image-resolver.js';
import { newCompletionId } from '../../platform/ids.js';
import { ApiError, invalidRequest } from '../api-error.js';

export interface CompatRouteDeps {
  readonly fleet: Fleet;
}

const ENDPOINTS = ['chat/completions', 'completions', 'embeddings', 'responses'] as const;
const anyObject = { type: 'object', additionalProperties: true, required: ['model'], properties: { model: { type: 'string', minLength: 1 } } };

// Documentation only (config.openapi, not a response schema): a response schema would make
// fastify drop every field of the engine's answer that it does not list.
const MODEL_LIST_DOC = {
  description: 'The models the fleet serves',
  content: {
    'application/json': {
      schema: {
        type: 'object',
        required: ['object', 'data'],
        properties: {
          object: { type: 'string', enum: ['list'] },
          data: {
            type: 'array',
            items: { type: 'object', required: ['id', 'object', 'created', 'owned_by'], properties: { id: { type: 'string' }, object: { type: 'string', enum: ['model'] }, created: { type: 'integer' }, owned_by: { type: 'string' } } },
          },
        },
      },
    },
  },
};

const OBJECT_OF: Record<(typeof ENDPOINTS)[number], string> = {
  'chat/completions': 'chat.completion',
  completions: 'text_completion',
  embeddings: 'list',
  responses: 'response',
};

/** The engine's answer, passed through as it sent it; chat and completions also stream. */
function inferenceDoc(path: (typeof ENDPOINTS)[number]) {
  const json = { schema: { type: 'object', description: `The engine's answer in OpenAI's shape (object ${OBJECT_OF[path]}), passed through unchanged`, required: ['object'], properties: { object: { type: 'string' } } } };
  const streams = path === 'chat/completions' || path === 'completions';
  return {
    description: streams ? "The engine's answer; with stream: true, server-sent events in OpenAI's chunk format ending with data: [DONE]" : "The engine's answer",
    content: { 'application/json': json, ...(streams ? { 'text/event-stream': { schema: { type: 'string' } } } : {}) },
  };
}

/**
 * Real-time inference under /compat/v1 (bearer API_KEY), routed through the same fleet as
 * batches. Chat and completions take `stream: true` and answer server-sent events in the OpenAI
 * chunk format.
 */
export function registerCompatRoutes(app: FastifyInstance, deps: CompatRouteDeps): void {
  const security = [{ bearer: [] }];
  app.get('/compat/v1/models', { schema: { summary: 'Models the fleet serves', tags: ['compat'], security }, config: { openapi: { responses: { 200: MODEL_LIST_DOC } } } }, async () => ({
    object: 'list',
    data: deps.fleet.models().map((id) => ({ id, object: 'model', created: 0, owned_by: 'spool' })),
  }));

  for (const path of ENDPOINTS) {
    app.post(
      `/compat/v1/${path}`,
      { schema: { summary: `OpenAI-compatible /v1/${path}`, tags: ['compat'], security, body: anyObject }, config: { openapi: { responses: { 200: inferenceDoc(path) } } } },
      async (request, reply) => serve(deps.fleet, `/v1/${path}`, request, reply),
    );
  }
}

async function serve(fleet: Fleet, endpoint: string, request: FastifyRequest, reply: FastifyReply) {
  const body = request.body as Record<string, unknown>;
  const model = body.model as string;
  const pool = fleet.engineFor(model);
  if (!pool) throw new ApiError(404, `The model ${JSON.stringify(model)} does not exist or is not served here`, 'invalid_request_error', 'model_not_found', 'model');
  const streaming = body.stream === true && (endpoint === '/v1/chat/completions' || endpoint === '/v1/completions');
  // A client that goes away before its answer is complete stops the work done for it.
  const abort = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  const sse = streaming ? new SseWriter(reply, endpoint, model, (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true) : undefined;
  try {
    const response = await pool.infer({ endpoint, body, signal: abort.signal, serviceClass: 'interactive' }, sse ? (delta) => sse.delta(delta) : undefined);
    if (sse && response.statusCode < 400) {
      sse.finish(response.body);
      return reply;
    }
    if (sse?.started) {
      sse.fail(response.body);
      return reply;
    }
    return reply.status(response.statusCode).header('x-request-id', request.id).send(response.body);
  } catch (error) {
    if (sse?.started) {
      // The engine's own words (a cut stream's reason) go to the log; the client gets the code.
      request.log.warn({ err: error }, 'a streamed answer ended early');
      sse.fail({ error: { message: 'The engine stopped before the answer was complete', type: 'server_error', param: null, code: 'engine_error' } });
      return reply;
    }
    if (error instanceof ImageFetchError) throw invalidRequest(error.message, 'messages', 'image_fetch_failed');
    if (error instanceof EngineUnavailableError) {
      request.log.warn({ reason: error.detail }, 'no engine answered');
      throw new ApiError(503, error.message, 'server_error', 'engine_unavailable');
    }
    throw error;
  }
}

/** Writes the OpenAI streaming format: data: <chunk> lines, then data: [DONE]. */
class SseWriter {
  started = false;
  private readonly id: string;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly chat: boolean;

  constructor(private readonly reply: FastifyReply, endpoint: string, private readonly model: string, private readonly includeUsage: boolean) {
    this.chat = endpoint === '/v1/chat/completions';
    this.id = newCompletionId(this.chat);
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    this.reply.hijack();
    this.reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-request-id': String(this.reply.request.id),
    });
    if (this.chat) this.send(this.chunk({ role: 'assistant', content: '' }, null));
  }

  private chunk(delta: Record<string, unknown> | string, finishReason: string | null, usage?: unknown) {
    const choice = this.chat
      ? { index: 0, delta, logprobs: null, finish_reason: finishReason }
      : { index: 0, text: delta as string, logprobs: null, finish_reason: finishReason };
    return {
      id: this.id,
      object: this.chat ? 'chat.completion.chunk' : 'text_completion',
      created: this.created,
      model: this.model,
      choices: [choice],
      ...(usage !== undefined ? { usage } : {}),
    };
  }

  /** false: the socket's buffer is full (wait for 'drain' before more). */
  private send(payload: unknown): boolean {
    return this.reply.raw.write(`data: ${typeof payload === 'string' ? payload : JSON.stringify(payload)}\n\n`);
  }

  /** Writes a piece; while the client's socket is full, a promise that settles when it drains or closes. */
  delta(text: string): void | Promise<void> {
    this.start();
    if (this.send(this.chunk(this.chat ? { content: text } : text, null))) return;
    const raw = this.reply.raw;
    return new Promise((resolve) => {
      const settle = () => {
        raw.off('drain', settle);
        raw.off('close', settle);
        resolve();
      };
      raw.once('drain', settle);
      raw.once('close', settle);
    });
  }

  finish(body: unknown): void {
    this.start();
    const answer = body as { choices?: Array<{ finish_reason?: string }>; usage?: unknown };
    this.send(this.chunk(this.chat ? {} : '', answer.choices?.[0]?.finish_reason ?? 'stop'));
    if (this.includeUsage) this.send({ id: this.id, object: this.chat ? 'chat.completion.chunk' : 'text_completion', created: this.created, model: this.model, choices: [], usage: answer.usage ?? null });
    this.send('[DONE]');
    this.reply.raw.end();
  }

  fail(body: unknown): void {
    this.send(body);
    this.send('[DONE]');
    this.reply.raw.end();
  }
}
