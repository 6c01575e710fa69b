import type { IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import { nodeHttp } from '../platform/node-http.js';
import type { TextDelta } from './builtin/builtin-engine.js';
import { StreamCutError } from './engine.js';

// node:https through require, as node:http (platform/node-http.ts): its ES module view would load
// Node's bundled undici into every process.
const nodeHttps = createRequire(import.meta.url)('node:https') as typeof import('node:https');

export interface StreamedAnswer {
  readonly statusCode: number;
  readonly requestId: string | undefined;
  /** The answer as one body (what a request without `stream` would have had): what the pool and the log see. */
  readonly body: unknown;
}

interface ChunkChoice {
  readonly delta?: { readonly role?: string; readonly content?: string | null };
  readonly text?: string;
  readonly finish_reason?: string | null;
}

interface Chunk {
  readonly id?: string;
  readonly created?: number;
  readonly model?: string;
  readonly choices?: readonly ChunkChoice[];
  readonly usage?: unknown;
}

/**
 * Asks an OpenAI-compatible server for a streamed chat or completions answer and hands each piece
 * of text to `onDelta` as its server-sent event arrives. Back-pressure: the next event is read
 * only once `onDelta`'s promise (the client's socket drained) settles, so a slow client slows the
 * engine's socket, not this process's memory. `signal` (the client gone, or the timeout) destroys
 * the connection, which is how vLLM and SGLang learn to stop generating. Usage is always asked for
 * (`stream_options.include_usage`), so the answer that resolves, at the last byte, carries it
 * whether or not the client asked. An error after text has gone out is a StreamCutError: the
 * request cannot be tried again without the client seeing part of an answer twice.
 */
export function streamAnswer(url: URL, headers: Record<string, string>, body: Record<string, unknown>, chat: boolean, signal: AbortSignal, onDelta: TextDelta): Promise<StreamedAnswer> {
  const payload = JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } });
  const client = url.protocol === 'https:' ? nodeHttps : nodeHttp;
  return new Promise<StreamedAnswer>((resolve, reject) => {
    const request = client.request(url, { method: 'POST', headers: { ...headers, accept: 'text/event-stream', 'content-length': Buffer.byteLength(payload) }, signal });
    request.once('error', reject);
    request.once('response', (response) => {
      readAnswer(response, chat, onDelta).then(resolve, (error: unknown) => {
        response.destroy();
        reject(error);
      });
    });
    request.end(payload);
  });
}

async function readAnswer(response: IncomingMessage, chat: boolean, onDelta: TextDelta): Promise<StreamedAnswer> {
  const statusCode = response.statusCode ?? 502;
  const requestId = typeof response.headers['x-request-id'] === 'string' ? response.headers['x-request-id'] : undefined;
  const decoder = new TextDecoder();
  const isEventStream = String(response.headers['content-type'] ?? '').startsWith('text/event-stream');
  if (statusCode >= 300 || !isEventStream) {
    // An error, or a server that answered whole: passed on as the body it sent (its text as one piece).
    let whole = '';
    for await (const piece of response) whole += decoder.decode(piece as Buffer, { stream: true });
    whole += decoder.decode();
    const body = parsedOrText(whole);
    if (statusCode < 300) {
      const choice = (body as { choices?: Array<{ message?: { content?: string }; text?: string }> } | null)?.choices?.[0];
      const content = choice?.message?.content ?? choice?.text;
      if (content) await onDelta(content);
    }
    return { statusCode, requestId, body };
  }
  let pending = '';
  let text = '';
  let sent = false;
  let last: Chunk = {};
  let finishReason: string | null = null;
  let usage: unknown;
  let done = false;
  try {
    for await (const piece of response) {
      pending += decoder.decode(piece as Buffer, { stream: true });
      // Events end with a blank line; a line of an event that starts with "data:" holds its JSON.
      let end: number;
      while ((end = pending.search(/\r?\n\r?\n/)) >= 0) {
        const event = pending.slice(0, end);
        pending = pending.slice(end + (pending[end] === '\r' ? 4 : 2));
        const data = event
          .split(/\r?\n/)
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5).trimStart())
          .join('\n');
        if (data === '[DONE]') done = true;
        if (!data || done) continue;
        const chunk = JSON.parse(data) as Chunk;
        last = { ...last, ...chunk };
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        if (choice.finish_reason) finishReason = choice.finish_reason;
        const delta = chat ? choice.delta?.content : choice.text;
        if (delta) {
          text += delta;
          sent = true;
          await onDelta(delta);
        }
      }
    }
    if (!done && sent) throw new Error('the connection closed before data: [DONE]');
  } catch (error) {
    if (sent) throw new StreamCutError(`the engine's stream ended early: ${error instanceof Error ? error.message : String(error)}`);
    throw error;
  }
  const base = { id: last.id, created: last.created ?? Math.floor(Date.now() / 1000), model: last.model, usage: usage ?? null };
  const body = chat
    ? { ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: finishReason ?? 'stop' }] }
    : { ...base, object: 'text_completion', choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason ?? 'stop' }] };
  return { statusCode, requestId, body };
}

function parsedOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
