import { createHash } from 'node:crypto';
import { newCompletionId, newEngineRequestId, newResponseId, newResponseMessageId } from '../../platform/ids.js';
import type { EngineRequest, EngineResponse } from '../engine.js';
import { BOS, EOS } from './checkpoint.js';
import { PrintableText } from './printable-text.js';
import { Sampler, type Transformer } from './transformer.js';

/** A request the built-in engine refuses: answered as an OpenAI 400. */
class BadRequest extends Error {
  constructor(message: string, readonly param: string | null = null, readonly code = 'invalid_value') {
    super(message);
  }
}

const encoder = new TextEncoder();
const bytesOf = (text: string): number[] => Array.from(encoder.encode(text));

/**
 * The chat template (documented in docs/API.md): BOS, then for each message `<|role|>\n`, its
 * content and `\n`, then `<|assistant|>\n`. Text parts are their text; an image part is
 * `<|image|>` and the sha256 of the image's bytes in hex, so the bytes steer the output.
 */
export function renderChat(messages: unknown): string {
  if (!Array.isArray(messages) || messages.length === 0) throw new BadRequest('messages must be a non-empty array', 'messages');
  let text = '';
  messages.forEach((message, index) => {
    const { role, content } = (message ?? {}) as { role?: unknown; content?: unknown };
    if (typeof role !== 'string') throw new BadRequest(`messages[${index}].role must be a string`, `messages[${index}].role`);
    text += `<|${role}|>\n${contentText(content, `messages[${index}].content`)}\n`;
  });
  return `${text}<|assistant|>\n`;
}

function contentText(content: unknown, param: string): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (!Array.isArray(content)) throw new BadRequest(`${param} must be a string or an array of parts`, param);
  return content
    .map((part: { type?: string; text?: unknown; image_url?: { url?: unknown } | string }, index) => {
      if (part?.type === 'text' || part?.type === 'input_text' || part?.type === 'output_text') return String(part.text ?? '');
      if (part?.type === 'image_url' || part?.type === 'input_image') {
        const url = typeof part.image_url === 'string' ? part.image_url : part.image_url?.url;
        const match = typeof url === 'string' ? /^data:[^;,]*(;base64)?,(.*)$/s.exec(url) : null;
        if (!match) throw new BadRequest(`${param}[${index}]: the built-in engine takes images as data URLs (s3:// images are fetched before they reach it)`, `${param}[${index}].image_url`);
        const bytes = match[1] ? Buffer.from(match[2]!, 'base64') : Buffer.from(decodeURIComponent(match[2]!));
        return `<|image|>${createHash('sha256').update(bytes).digest('hex')}`;
      }
      throw new BadRequest(`${param}[${index}] has an unsupported type ${JSON.stringify(part?.type)}`, `${param}[${index}].type`);
    })
    .join('');
}

interface Generation {
  readonly maxTokens: number;
  readonly temperature: number;
  readonly seed: number;
  readonly stop: readonly string[];
}

interface Generated {
  readonly text: string;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly finishReason: 'stop' | 'length';
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

function numberParam(body: Record<string, unknown>, name: string, fallback: number, min: number, max: number): number {
  const value = body[name];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) throw new BadRequest(`${name} must be a number from ${min} to ${max}`, name);
  return value;
}

function generationParams(body: Record<string, unknown>, defaultMaxTokens: number, maxTokensName = 'max_tokens'): Generation {
  const stop = body.stop;
  if (stop !== undefined && stop !== null && typeof stop !== 'string' && !(Array.isArray(stop) && stop.every((entry) => typeof entry === 'string'))) {
    throw new BadRequest('stop must be a string or an array of strings', 'stop');
  }
  if (body.n !== undefined && body.n !== null && body.n !== 1) throw new BadRequest('the built-in engine produces one choice per prompt: n must be 1', 'n');
  const maxTokens = body.max_completion_tokens ?? body[maxTokensName];
  return {
    maxTokens: numberParam({ maxTokens }, 'maxTokens', defaultMaxTokens, 0, 1_000_000),
    temperature: numberParam(body, 'temperature', 1, 0, 2),
    seed: Math.floor(numberParam(body, 'seed', 0, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)),
    stop: typeof stop === 'string' ? [stop] : Array.isArray(stop) ? (stop as string[]).filter(Boolean) : [],
  };
}

/** One streamed piece of generated text; a promise while the caller cannot take more yet (back-pressure). */
export type TextDelta = (delta: string) => void | Promise<void>;

/**
 * The built-in engine: the OpenAI request shapes (chat, completions, embeddings, responses) on a
 * Transformer. Generation yields to the event loop every few tokens, so one long request does
 * not stall the HTTP server it shares a process with.
 */
export class BuiltinEngine {
  constructor(private model: Transformer, readonly modelName: string) {}

  get config() {
    return this.model.config;
  }

  get manifest() {
    return this.model.manifest;
  }

  /** Serves new requests on other weights; requests already running finish on the old ones. */
  swap(model: Transformer): void {
    this.model = model;
  }

  async infer(request: EngineRequest, onDelta?: TextDelta): Promise<EngineResponse> {
    const requestId = newEngineRequestId();
    try {
      const body = await this.answer(request.endpoint, request.body, onDelta, request.signal);
      return { statusCode: 200, requestId, body };
    } catch (error) {
      if (!(error instanceof BadRequest)) throw error;
      return { statusCode: 400, requestId, body: { error: { message: error.message, type: 'invalid_request_error', param: error.param, code: error.code } } };
    }
  }

  private async answer(endpoint: string, body: Record<string, unknown>, onDelta?: TextDelta, signal?: AbortSignal): Promise<unknown> {
    const model = this.model;
    const created = Math.floor(Date.now() / 1000);
    switch (endpoint) {
      case '/v1/chat/completions': {
        const generated = await this.generate(model, renderChat(body.messages), generationParams(body, 64), onDelta, signal);
        return {
          id: newCompletionId(true),
          object: 'chat.completion',
          created,
          model: this.modelName,
          choices: [{ index: 0, message: { role: 'assistant', content: generated.text, refusal: null }, logprobs: null, finish_reason: generated.finishReason }],
          usage: usage(generated.promptTokens, generated.completionTokens),
        };
      }
      case '/v1/completions': {
        const prompts = typeof body.prompt === 'string' ? [body.prompt] : Array.isArray(body.prompt) && body.prompt.every((p) => typeof p === 'string') ? (body.prompt as string[]) : undefined;
        if (!prompts || prompts.length === 0) throw new BadRequest('prompt must be a string or an array of strings', 'prompt');
        const params = generationParams(body, 16);
        const choices = [];
        let promptTokens = 0;
        let completionTokens = 0;
        for (const [index, prompt] of prompts.entries()) {
          const generated = await this.generate(model, prompt, params, prompts.length === 1 ? onDelta : undefined, signal);
          promptTokens += generated.promptTokens;
          completionTokens += generated.completionTokens;
          choices.push({ index, text: generated.text, logprobs: null, finish_reason: generated.finishReason });
        }
        return { id: newCompletionId(false), object: 'text_completion', created, model: this.modelName, choices, usage: usage(promptTokens, completionTokens) };
      }
      case '/v1/embeddings': {
        const inputs = embeddingInputs(body.input);
        const format = body.encoding_format ?? 'float';
        if (format !== 'float' && format !== 'base64') throw new BadRequest('encoding_format must be float or base64', 'encoding_format');
        let tokens = 0;
        const data = [];
        for (const [index, input] of inputs.entries()) {
          const ids = [BOS, ...input];
          if (ids.length > model.config.max_position_embeddings) throw new BadRequest(`input ${index} is ${ids.length} tokens, more than the ${model.config.max_position_embeddings}-token context`, 'input', 'context_length_exceeded');
          tokens += ids.length;
          const vector = model.embedding(ids);
          data.push({ object: 'embedding', index, embedding: format === 'base64' ? Buffer.from(vector.buffer).toString('base64') : Array.from(vector) });
          await yieldToEventLoop();
        }
        return { object: 'list', data, model: this.modelName, usage: { prompt_tokens: tokens, total_tokens: tokens } };
      }
      case '/v1/responses': {
        if (body.stream) throw new BadRequest('streaming is not supported on /responses by the built-in engine', 'stream');
        const messages: unknown[] = [];
        if (typeof body.instructions === 'string') messages.push({ role: 'system', content: body.instructions });
        if (typeof body.input === 'string') messages.push({ role: 'user', content: body.input });
        else if (Array.isArray(body.input)) messages.push(...body.input);
        else throw new BadRequest('input must be a string or an array of messages', 'input');
        const generated = await this.generate(model, renderChat(messages), generationParams(body, 64, 'max_output_tokens'), undefined, signal);
        return {
          id: newResponseId(),
          object: 'response',
          created_at: created,
          model: this.modelName,
          status: 'completed',
          output: [
            {
              type: 'message',
              id: newResponseMessageId(),
              status: 'completed',
              role: 'assistant',
              content: [{ type: 'output_text', text: generated.text, annotations: [] }],
            },
          ],
          usage: { input_tokens: generated.promptTokens, output_tokens: generated.completionTokens, total_tokens: generated.promptTokens + generated.completionTokens },
        };
      }
      default:
        throw new BadRequest(`the built-in engine does not serve ${endpoint}`, null, 'unsupported_endpoint');
    }
  }

  private async generate(model: Transformer, prompt: string, params: Generation, onDelta?: TextDelta, signal?: AbortSignal): Promise<Generated> {
    const tokens = [BOS, ...bytesOf(prompt)];
    const window = model.config.max_position_embeddings;
    if (tokens.length >= window) throw new BadRequest(`the prompt is ${tokens.length} tokens; the context window is ${window}`, 'messages', 'context_length_exceeded');
    const session = model.newSession();
    let logits: Float32Array = new Float32Array(0);
    for (const [index, token] of tokens.entries()) {
      logits = model.step(session, token);
      if (index % 32 === 31) await yieldToEventLoop();
    }
    const sampler = new Sampler(params.seed, params.temperature);
    const decoder = new TextDecoder('utf-8');
    const printable = new PrintableText();
    const limit = Math.min(params.maxTokens, window - tokens.length);
    let text = '';
    let emitted = 0;
    let generated = 0;
    let finishReason: 'stop' | 'length' = 'length';
    while (generated < limit) {
      const left = limit - generated;
      const next = sampler.next(logits, (token) => (token === EOS ? printable.atCharacterBoundary : token < BOS && printable.allowsByte(token, left)));
      generated += 1;
      if (next === EOS) {
        finishReason = 'stop';
        break;
      }
      printable.accept(next);
      text += decoder.decode(Uint8Array.of(next), { stream: true });
      const stopAt = params.stop.map((stop) => text.indexOf(stop)).filter((at) => at >= 0);
      if (stopAt.length > 0) {
        text = text.slice(0, Math.min(...stopAt));
        finishReason = 'stop';
        break;
      }
      // Hold back what could be the start of a stop sequence.
      const safe = text.length - Math.max(0, ...params.stop.map((stop) => stop.length - 1));
      if (onDelta && safe > emitted) {
        onDelta(text.slice(emitted, safe));
        emitted = safe;
      }
      if (generated < limit) logits = model.step(session, next);
      if (generated % 16 === 0) {
        await yieldToEventLoop();
        signal?.throwIfAborted(); // the caller went away: stop spending the CPU on it
      }
    }
    if (finishReason === 'length') text += decoder.decode();
    if (onDelta && text.length > emitted) onDelta(text.slice(emitted));
    return { text, promptTokens: tokens.length, completionTokens: generated, finishReason };
  }
}

function usage(prompt: number, completion: number) {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** Embedding inputs as byte tokens: a string, an array of strings, or token arrays (each id 0–255). */
function embeddingInputs(input: unknown): number[][] {
  const asTokens = (value: unknown, param: string): number[] => {
    if (typeof value === 'string') return bytesOf(value);
    if (Array.isArray(value) && value.every((id) => Number.isInteger(id) && id >= 0 && id < 256)) return value as number[];
    throw new BadRequest(`${param} must be a string or an array of token ids from 0 to 255`, 'input');
  };
  if (typeof input === 'string') return [asTokens(input, 'input')];
  if (Array.isArray(input) && input.length > 0) {
    if (input.every((item) => typeof item === 'number')) return [asTokens(input, 'input')];
    return input.map((item, index) => asTokens(item, `input[${index}]`));
  }
  throw new BadRequest('input must be a non-empty string or array', 'input');
}
