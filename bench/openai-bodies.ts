// The OpenAI-shaped bodies the engine simulator answers (bench/engine-upstream.ts): completions and
// chat completions, whole or as server-sent-event chunks, usage, and errors.

export type GenerationKind = 'chat' | 'completion';

export interface Usage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
}

/** The same instant in every answer, as the fixed-latency mode has it. */
const CREATED = 1_700_000_000;

export function usageOf(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/** The text of generated token `index`: the first echoes the request's marker, the others are one word each. */
export function tokenText(index: number, marker: string): string {
  return index === 0 ? `echo: ${marker}` : ' tok';
}

interface Identity {
  readonly id: string;
  readonly model: string;
}

/** The whole answer, once the sequence has finished. */
export function completionBody(kind: GenerationKind, identity: Identity, text: string, finishReason: string, usage: Usage): string {
  const choice =
    kind === 'chat'
      ? { index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: finishReason }
      : { index: 0, text, logprobs: null, finish_reason: finishReason };
  return JSON.stringify({ id: identity.id, object: kind === 'chat' ? 'chat.completion' : 'text_completion', created: CREATED, model: identity.model, choices: [choice], usage });
}

/** One server-sent event carrying the token(s) a step produced; the chat's first says the role. */
export function chunkEvent(kind: GenerationKind, identity: Identity, index: number, text: string, finishReason: string | null): string {
  const choice =
    kind === 'chat'
      ? { index: 0, delta: index === 0 ? { role: 'assistant', content: text } : { content: text }, logprobs: null, finish_reason: finishReason }
      : { index: 0, text, logprobs: null, finish_reason: finishReason };
  return event({ id: identity.id, object: kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', created: CREATED, model: identity.model, choices: [choice] });
}

/** The last chunk before [DONE] when the request asked for `stream_options.include_usage`. */
export function usageEvent(kind: GenerationKind, identity: Identity, usage: Usage): string {
  return event({ id: identity.id, object: kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', created: CREATED, model: identity.model, choices: [], usage });
}

export const DONE_EVENT = 'data: [DONE]\n\n';

function event(data: object): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

export function errorBody(message: string): string {
  return JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: null } });
}
