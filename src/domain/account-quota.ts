// What an account's limits allow: the work it has queued and the bytes it stores. Pure.
import type { AccountLimits } from './account.js';
import type { BatchError } from './batch.js';

/** What an account holds now (its read models' view). */
export interface AccountUsage {
  readonly queued_lines: number;
  readonly queued_tokens: number;
  readonly stored_bytes: number;
}

/**
 * A request line's input tokens, estimated before anything runs: a token for every 4 bytes of the
 * line, rounded up (about what English text and JSON come to with the GPT tokenizers; no
 * tokenizer is run for a limit). The same estimate for every line, so a limit means the same for
 * every account.
 */
export function estimatedTokens(lineBytes: number): number {
  return Math.ceil(lineBytes / 4);
}

/**
 * Why a batch of `lines` lines and `tokens` estimated tokens may not join what the account has
 * queued (`queued`: its other batches not yet ended); undefined when it may. The batch fails
 * validation with this error, as OpenAI fails a batch over its enqueued-token limit.
 */
export function queuedWorkRefusal(limits: AccountLimits, queued: Pick<AccountUsage, 'queued_lines' | 'queued_tokens'>, lines: number, tokens: number): BatchError | undefined {
  if (limits.queued_lines !== null && queued.queued_lines + lines > limits.queued_lines) {
    return { code: 'line_limit_exceeded', line: null, message: `The account's queued lines limit is ${limits.queued_lines}: ${queued.queued_lines} lines are queued in its other batches and this batch has ${lines}`, param: null };
  }
  if (limits.queued_tokens !== null && queued.queued_tokens + tokens > limits.queued_tokens) {
    return { code: 'token_limit_exceeded', line: null, message: `The account's enqueued token limit is ${limits.queued_tokens}: about ${queued.queued_tokens} tokens are queued in its other batches and this batch has about ${tokens}`, param: null };
  }
  return undefined;
}

/** Why a file of `bytes` may not be stored beside what the account stores; undefined when it may. */
export function storageRefusal(limits: AccountLimits, stored: number, bytes: number): string | undefined {
  if (limits.stored_bytes === null || stored + bytes <= limits.stored_bytes) return undefined;
  return `The account's storage limit is ${limits.stored_bytes} bytes: it stores ${stored} bytes and this file has ${bytes}`;
}
