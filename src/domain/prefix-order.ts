// Prefix-aware order of a batch's lines (pure). Engines keep the KV state of prompt prefixes they
// computed recently; lines that share a long prefix (a system prompt, a document) and run back to
// back compute it once, while the same lines in file order evict and recompute it again and again.
import { createHash } from 'node:crypto';
import type { BatchEndpoint } from './batch.js';
import { Uint32List } from './uint32-list.js';

/**
 * A shared prefix shorter than this many characters (about 64 tokens, four KV blocks) is not worth
 * moving lines for.
 */
export const MIN_SHARED_PREFIX_CHARS = 256;

/** The depths, in characters of the rendered prompt, at which lines are compared after the instructions. */
export const PREFIX_DEPTHS_CHARS = [1_024, 4_096, 16_384] as const;

const DEEPEST = PREFIX_DEPTHS_CHARS[PREFIX_DEPTHS_CHARS.length - 1]!;

/** Signature levels per line: the instructions, then each depth of PREFIX_DEPTHS_CHARS. */
export const PREFIX_LEVELS = 1 + PREFIX_DEPTHS_CHARS.length;

/**
 * A line's prefix signature: one hash per level, undefined where the level says nothing (no
 * instructions, or a prompt shorter than MIN_SHARED_PREFIX_CHARS). Level 0 is the instructions
 * (chat: the leading system and developer messages; responses: `instructions`); levels 1.. are the
 * rendered prompt cut at each depth (a prompt shorter than a depth is whole at that depth, so
 * identical prompts share every level). Embeddings have none: they are one pass without a cache
 * worth ordering for.
 */
export function prefixSignature(endpoint: BatchEndpoint, body: Record<string, unknown>): readonly (string | undefined)[] {
  const rendered = renderPrompt(endpoint, body);
  if (rendered === undefined) return [];
  const { text, instructionsEnd } = rendered;
  // Where each level's prefix ends in the rendered text (undefined: no signature at that level).
  const ends = [instructionsEnd >= MIN_SHARED_PREFIX_CHARS ? instructionsEnd : undefined, ...PREFIX_DEPTHS_CHARS.map((depth) => (text.length >= MIN_SHARED_PREFIX_CHARS ? Math.min(depth, text.length) : undefined))];
  // A short prompt has no level: no hash is made for it (a sha1 each was a sixth of validating
  // 50,000 short lines).
  if (ends.every((end) => end === undefined)) return ends;
  // One running hash over the text, read at each end in turn: every character is hashed once.
  const hash = createHash('sha1');
  let hashed = 0;
  const digests = new Map<number, string>();
  for (const end of [...new Set(ends.filter((end): end is number => end !== undefined))].sort((a, b) => a - b)) {
    hash.update(text.slice(hashed, end));
    hashed = end;
    digests.set(end, hash.copy().digest('base64'));
  }
  return ends.map((end) => (end === undefined ? undefined : digests.get(end)));
}

/**
 * Where each line stands in the prefix-aware order: one key per level, compared in turn, then the
 * line's own place. A level's key is the file position of the first line that shares the line's
 * path of signatures down to that level, so a group stands where its first line stands in the file,
 * lines with nothing shared keep their relative order, and a group's later lines move up to its
 * first. Levels a line has no signature for are skipped; below its deepest signature, and for a
 * line with none at all, the key is the line's own position.
 */
export class PrefixSignatureTable {
  private readonly firstOfPath = new Map<string, number>();
  /** PREFIX_LEVELS keys a line, line after line. */
  private readonly keys = new Uint32List();
  /** Whether two lines share a path at some level: without, every key is the line's own position. */
  private shared = false;

  /** Lines added so far. */
  get length(): number {
    return this.keys.length / PREFIX_LEVELS;
  }

  /** Adds the next line in file order. */
  add(signature: readonly (string | undefined)[]): void {
    const position = this.length;
    const path = signature.filter((hash): hash is string => hash !== undefined);
    let parent = '';
    for (let level = 0; level < PREFIX_LEVELS; level++) {
      if (level >= path.length) {
        this.keys.push(position);
        continue;
      }
      const key = `${parent}/${path[level]}`;
      let first = this.firstOfPath.get(key);
      if (first === undefined) {
        first = position;
        this.firstOfPath.set(key, first);
      } else {
        this.shared = true;
      }
      this.keys.push(first);
      // The first line's position names the path from here on, which keeps keys short.
      parent = String(first);
    }
  }

  /** The order to run the lines in, as positions in the file; undefined when it is file order. */
  order(): number[] | undefined {
    // No sort of 50,000 positions to find the file's own order.
    if (!this.shared) return undefined;
    const keys = this.keys;
    const order = Array.from({ length: this.length }, (_, position) => position);
    order.sort((a, b) => {
      for (let level = 0; level < PREFIX_LEVELS; level++) {
        const left = keys.at(a * PREFIX_LEVELS + level);
        const right = keys.at(b * PREFIX_LEVELS + level);
        if (left !== right) return left - right;
      }
      return a - b;
    });
    return order.every((line, position) => line === position) ? undefined : order;
  }
}

/** The prompt as the engine's prefix cache sees it, in order: instructions first. */
function renderPrompt(endpoint: BatchEndpoint, body: Record<string, unknown>): { instructionsEnd: number; text: string } | undefined {
  if (endpoint === '/v1/chat/completions') {
    const messages = Array.isArray(body.messages) ? (body.messages as unknown[]) : [];
    let instructionsEnd = 0;
    let text = '';
    let leading = true;
    for (const message of messages) {
      // Nothing past the deepest depth is compared: a long conversation is not rendered whole.
      if (text.length > DEEPEST) break;
      const { role, content } = (message ?? {}) as { role?: unknown; content?: unknown };
      const part = `${String(role)}\u0000${contentText(content)}\u0001`;
      leading &&= role === 'system' || role === 'developer';
      text += part;
      if (leading) instructionsEnd = text.length;
    }
    return { instructionsEnd, text };
  }
  if (endpoint === '/v1/completions') return { instructionsEnd: 0, text: contentText(body.prompt) };
  if (endpoint === '/v1/responses') {
    const instructions = typeof body.instructions === 'string' ? body.instructions : '';
    return { instructionsEnd: instructions.length, text: `${instructions}\u0001${contentText(body.input)}` };
  }
  return undefined;
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (content === undefined || content === null) return '';
  return JSON.stringify(content);
}
