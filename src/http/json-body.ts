import type { FastifyInstance } from 'fastify';
import { ApiError, invalidRequest } from './api-error.js';

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The charset parameter of a Content-Type, lower-cased, if there is one. */
function charsetOf(contentType: string | undefined): string | undefined {
  return /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '')?.[1]?.toLowerCase();
}

/**
 * Where in `value` the first number that is not finite sits, as the envelope's `param` names a
 * field (`output_expires_after.seconds`, `messages.0.temperature`; '' for the body itself), or
 * undefined when every number is finite. JSON.parse reads a number beyond the double range
 * (1e309) as ±Infinity, which no schema bound is written for and no event may hold. Walked
 * without recursion: a body may nest as deep as its megabyte allows.
 */
export function nonFiniteNumberAt(value: unknown): string | undefined {
  const pending: Array<[unknown, string]> = [[value, '']];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [node, path] = next;
    if (typeof node === 'number') {
      if (!Number.isFinite(node)) return path;
    } else if (node !== null && typeof node === 'object') {
      const entries = Array.isArray(node) ? node.map((item, index) => [String(index), item] as const) : Object.entries(node);
      // Pushed in reverse, so the first field in the body is the one named.
      for (let index = entries.length - 1; index >= 0; index--) {
        const [key, item] = entries[index]!;
        pending.push([item, path ? `${path}.${key}` : key]);
      }
    }
  }
  return undefined;
}

/**
 * JSON bodies are UTF-8 (RFC 8259 §8.1), strictly: another declared charset is 415; bytes that
 * are not UTF-8, or a byte order mark, are 400 — rather than decoded into replacement characters
 * that would end up in stored metadata. Parsing itself is Fastify's own (prototype-poisoning
 * checks included). Every number must be finite: one beyond the double range is 400 naming its
 * field, whichever route the body is for. Plain text bodies are not taken: no route reads one.
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const charset = charsetOf(request.headers['content-type']);
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      return done(new ApiError(415, `Unsupported charset ${JSON.stringify(charset)}: JSON bodies are UTF-8`, 'invalid_request_error', 'unsupported_media_type'), undefined);
    }
    const bytes = body as Buffer;
    if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
      return done(invalidRequest('The JSON body starts with a byte order mark: send UTF-8 without one', '', 'invalid_json'), undefined);
    }
    let text: string;
    try {
      text = UTF8.decode(bytes);
    } catch {
      return done(invalidRequest('The JSON body is not valid UTF-8', '', 'invalid_json'), undefined);
    }
    parseJson(request, text, (error, parsed) => {
      if (error) {
        const empty = (error as { code?: string }).code === 'FST_ERR_CTP_EMPTY_JSON_BODY';
        return done(invalidRequest(empty ? 'The request body is empty: send a JSON object' : `The body is not valid JSON: ${error.message}`, '', 'invalid_json'), undefined);
      }
      const nonFinite = nonFiniteNumberAt(parsed);
      if (nonFinite !== undefined) {
        return done(invalidRequest(`Invalid ${nonFinite || 'body'}: must be a finite number (JSON numbers beyond ±1.7976931348623157e308 are not taken)`, nonFinite), undefined);
      }
      done(null, parsed);
    });
  });
}
