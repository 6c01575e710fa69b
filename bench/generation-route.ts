// POST /v1/chat/completions and /v1/completions on the continuous-batching engine: the request
// becomes a sequence of its prompt's tokens (4 characters a token, as bench/prefix-cache.ts counts
// them, at least MIN_PROMPT_TOKENS) generating max_completion_tokens or max_tokens tokens (the
// simulator's default when absent). Streamed (`stream: true`), each step that produces one of its
// tokens sends one chunk, then `data: [DONE]`; otherwise the whole answer comes once the sequence
// has finished. A client that goes away takes its sequence out of the engine.
import type { ServerResponse } from 'node:http';
import type { ContinuousBatchingEngine } from '../test/support/engine-model/continuous-batching-engine.js';
import type { EngineClock } from '../test/support/engine-model/engine-clock.js';
import type { EngineStats } from './engine-stats.js';
import { DONE_EVENT, type GenerationKind, chunkEvent, completionBody, errorBody, tokenText, usageEvent, usageOf } from './openai-bodies.js';
import { promptText, promptTokens } from './prefix-cache.js';

/** A chat template adds tokens of its own; no prompt is shorter than this. */
export const MIN_PROMPT_TOKENS = 8;

export interface GenerationContext {
  readonly engine: ContinuousBatchingEngine;
  readonly stats: EngineStats;
  readonly clock: EngineClock;
  readonly defaultMaxTokens: number;
}

interface GenerationRequest {
  readonly model?: unknown;
  readonly messages?: Array<{ content?: unknown }>;
  readonly prompt?: unknown;
  readonly max_tokens?: unknown;
  readonly max_completion_tokens?: unknown;
  readonly priority?: unknown;
  readonly stream?: unknown;
  readonly stream_options?: { include_usage?: unknown } | null;
}

/** The first message's content (a chat's) or the prompt, at most 64 characters. */
export function markerOf(request: GenerationRequest): string {
  const text = request.messages?.[0]?.content ?? request.prompt ?? '';
  return (typeof text === 'string' ? text : JSON.stringify(text)).slice(0, 64);
}

/** vLLM's priority field: an integer, absent meaning 0; anything else is not a priority. */
export function priorityOf(request: { priority?: unknown }): number {
  return typeof request.priority === 'number' && Number.isInteger(request.priority) ? request.priority : 0;
}

export function serveGeneration(context: GenerationContext, kind: GenerationKind, body: unknown, response: ServerResponse): void {
  const refuse = (message: string) => response.writeHead(400, { 'content-type': 'application/json' }).end(errorBody(message));
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return void refuse('the request body must be a JSON object');
  const request = body as GenerationRequest;
  const asked = request.max_completion_tokens ?? request.max_tokens;
  if (asked !== undefined && asked !== null && !(typeof asked === 'number' && Number.isInteger(asked) && asked >= 1)) {
    return void refuse(`max_tokens must be an integer of at least 1, got ${JSON.stringify(asked)}`);
  }
  const maxTokens = typeof asked === 'number' ? asked : context.defaultMaxTokens;
  const prompt = Math.max(MIN_PROMPT_TOKENS, promptTokens(promptText(request)));
  const refusal = context.engine.refusal(prompt, maxTokens);
  if (refusal) return void refuse(refusal);

  const { engine, stats, clock } = context;
  const priority = priorityOf(request);
  const marker = markerOf(request);
  const stream = request.stream === true;
  // A request that set its length ran to it; one that did not stopped where the model would.
  const finishReason = typeof asked === 'number' ? 'length' : 'stop';
  const arrivedAt = clock.now;
  stats.arrived();
  let text = '';
  let finished = false;
  const identity = { id: '', model: typeof request.model === 'string' ? request.model : 'bench-model' };
  const id = engine.submit({
    promptTokens: prompt,
    maxTokens,
    priority,
    onStart: () => stats.start(marker, priority),
    onToken: (index) => {
      const piece = tokenText(index, marker);
      if (stream) response.write(chunkEvent(kind, identity, index, piece, index === maxTokens - 1 ? finishReason : null));
      else text += piece;
    },
    onFinish: () => {
      finished = true;
      const usage = usageOf(prompt, maxTokens);
      if (stream) {
        if (request.stream_options?.include_usage === true) response.write(usageEvent(kind, identity, usage));
        response.end(DONE_EVENT);
      } else {
        response.writeHead(200, { 'content-type': 'application/json', 'x-request-id': requestId }).end(completionBody(kind, identity, text, finishReason, usage));
      }
      stats.answered(priority, clock.now - arrivedAt);
    },
  });
  const requestId = `req_${id + 1}`;
  identity.id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${id + 1}`;
  if (stream) response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-request-id': requestId });
  response.on('close', () => {
    if (!finished) engine.cancel(id);
  });
}
