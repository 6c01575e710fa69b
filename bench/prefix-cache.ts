// vLLM's automatic prefix caching, simply, for the bench upstream (bench/upstream.ts) and for the
// prefix benchmark's theoretical maximum (bench/prefix.ts): both must count blocks the same way.
//
// A prompt's text is taken as tokens of 4 characters, cut into blocks of 16 tokens (64
// characters); only full blocks are cached, as in vLLM. A block is identified by a chained hash
// (its predecessor's id and its own text), so equal text after a different beginning is a
// different block, and a prompt's cached part is the run of its leading blocks already present.
import { hash } from 'node:crypto';

export const CHARS_PER_TOKEN = 4;
export const BLOCK_TOKENS = 16;
const BLOCK_CHARS = CHARS_PER_TOKEN * BLOCK_TOKENS;

/** A request's prompt as text: a chat's messages (role, then content) in order, or a completion's prompt. */
export function promptText(request: unknown): string {
  const { messages, prompt } = (request ?? {}) as { messages?: unknown; prompt?: unknown };
  if (Array.isArray(messages)) {
    return messages
      .map((message: { role?: unknown; content?: unknown } | null) => `${String(message?.role ?? '')}\n${textOf(message?.content)}\n`)
      .join('');
  }
  return textOf(prompt);
}

// Multimodal parts and token arrays are counted by their JSON: only their length and equality matter here.
const textOf = (value: unknown): string => (typeof value === 'string' ? value : value === undefined || value === null ? '' : JSON.stringify(value));

/** Approximate prompt tokens: one per 4 characters, rounded up. */
export function promptTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/** The ids of the text's full blocks, each chained to the one before it. */
export function blockIds(text: string): string[] {
  const ids: string[] = [];
  let previous = '';
  for (let start = 0; start + BLOCK_CHARS <= text.length; start += BLOCK_CHARS) {
    // A base64 sha256 is always 44 characters, so the concatenation is unambiguous.
    previous = hash('sha256', previous + text.slice(start, start + BLOCK_CHARS), 'base64');
    ids.push(previous);
  }
  return ids;
}

/**
 * An LRU of block ids bounded by a token budget. `admit` answers how many of a request's leading
 * blocks are present, then makes all its blocks the most recent; the tail is touched first, so
 * when space runs short a prompt loses its end before its beginning (vLLM frees a finished
 * request's blocks tail first for the same reason).
 */
export class PrefixCache {
  /** Map order is recency order: the first key is the least recently used. */
  private readonly blocks = new Map<string, true>();
  private readonly capacity: number;

  constructor(budgetTokens: number) {
    this.capacity = Math.floor(budgetTokens / BLOCK_TOKENS);
  }

  /** Cached leading blocks of this request, before its own blocks are inserted. */
  admit(ids: readonly string[]): number {
    let hits = 0;
    while (hits < ids.length && this.blocks.has(ids[hits]!)) hits++;
    for (let index = ids.length - 1; index >= 0; index--) {
      this.blocks.delete(ids[index]!);
      this.blocks.set(ids[index]!, true);
    }
    for (const oldest of this.blocks.keys()) {
      if (this.blocks.size <= this.capacity) break;
      this.blocks.delete(oldest);
    }
    return hits;
  }
}

/**
 * The most tokens any order could find cached, given an unbounded cache: every full block counts
 * once uncached (its first occurrence) and cached at every later one. Since ids are chained, a
 * block seen before means its whole prefix was, so the sum does not depend on the order.
 */
export class CacheableTokens {
  private readonly seen = new Set<string>();
  total = 0;

  add(ids: readonly string[]): void {
    for (const id of ids) {
      if (this.seen.has(id)) this.total += BLOCK_TOKENS;
      else this.seen.add(id);
    }
  }
}
