// POST /v1/embeddings on the embedding engine: each input (a string, an array of strings, or
// token ids) is one sequence of its tokens (4 characters a token, at least 1, at most the
// encoder's 512), computed in whatever step takes it; the answer comes once all of the request's
// inputs are computed, as OpenAI embedding objects with usage. A client that goes away takes its
// inputs out of the engine.
import type { ServerResponse } from 'node:http';
import type { EmbeddingBatchEngine } from '../test/support/engine-model/embedding-batch-engine.js';
import type { EngineClock } from '../test/support/engine-model/engine-clock.js';
import type { EngineStats } from './engine-stats.js';
import { base64Of, embeddingOf } from './embedding-vectors.js';
import { priorityOf } from './generation-route.js';
import { errorBody } from './openai-bodies.js';
import { CHARS_PER_TOKEN } from './prefix-cache.js';

/** An encoder's positions: longer inputs are cut to this many tokens. */
export const MAX_INPUT_TOKENS = 512;

export interface EmbeddingContext {
  readonly engine: EmbeddingBatchEngine;
  readonly stats: EngineStats;
  readonly clock: EngineClock;
}

interface EmbeddingRequest {
  readonly input?: unknown;
  readonly model?: unknown;
  readonly encoding_format?: unknown;
  readonly priority?: unknown;
}

/** The request's inputs as texts with their token counts, or why there are none. */
function inputsOf(input: unknown): Array<{ text: string; tokens: number }> | string {
  const tokenIds = (value: unknown): value is number[] => Array.isArray(value) && value.length > 0 && value.every((id) => Number.isInteger(id));
  const items: unknown[] = typeof input === 'string' || tokenIds(input) ? [input] : Array.isArray(input) ? input : [];
  if (items.length === 0) return 'input must be a string, an array of strings or token ids, and not empty';
  const inputs: Array<{ text: string; tokens: number }> = [];
  for (const item of items) {
    if (typeof item === 'string') inputs.push({ text: item, tokens: Math.ceil(item.length / CHARS_PER_TOKEN) });
    else if (tokenIds(item)) inputs.push({ text: JSON.stringify(item), tokens: item.length });
    else return 'each input must be a string or an array of token ids';
  }
  return inputs.map(({ text, tokens }) => ({ text, tokens: Math.min(MAX_INPUT_TOKENS, Math.max(1, tokens)) }));
}

export function serveEmbeddings(context: EmbeddingContext, body: unknown, response: ServerResponse): void {
  const refuse = (message: string) => response.writeHead(400, { 'content-type': 'application/json' }).end(errorBody(message));
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return void refuse('the request body must be a JSON object');
  const request = body as EmbeddingRequest;
  const format = request.encoding_format ?? 'float';
  if (format !== 'float' && format !== 'base64') return void refuse(`encoding_format must be float or base64, not ${JSON.stringify(format)}`);
  const inputs = inputsOf(request.input);
  if (typeof inputs === 'string') return void refuse(inputs);

  const { engine, stats, clock } = context;
  const priority = priorityOf(request);
  const arrivedAt = clock.now;
  stats.arrived();
  let started = false;
  /** Inputs not computed yet. */
  const pending = new Set<number>();
  const answer = () => {
    const data = inputs.map((input, index) => {
      const vector = embeddingOf(input.text);
      return { object: 'embedding', index, embedding: format === 'base64' ? base64Of(vector) : vector };
    });
    const tokens = inputs.reduce((sum, input) => sum + input.tokens, 0);
    const model = typeof request.model === 'string' ? request.model : 'bench-model';
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data, model, usage: { prompt_tokens: tokens, total_tokens: tokens } }));
    stats.answered(priority, clock.now - arrivedAt);
  };
  for (const input of inputs) {
    const id: number = engine.submit({
      tokens: input.tokens,
      priority,
      onStart: () => {
        if (!started) stats.start(inputs[0]!.text.slice(0, 64), priority);
        started = true;
      },
      onDone: () => {
        pending.delete(id);
        if (pending.size === 0) answer();
      },
    });
    pending.add(id);
  }
  response.on('close', () => {
    for (const id of pending) engine.cancel(id);
  });
}
