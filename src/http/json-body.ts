import type { FastifyInstance } from 'fastify';
import { ApiError, invalidRequest } from './api-error.js';

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The charset parameter of a Content-Type, lower-cased, if there is one. */
function charsetOf(contentType: string | undefined): string | undefined {
  return /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '')?.[1]?.toLowerCase();
}

/**
 * JSON bodies are UTF-8 (RFC 8259 §8.1), strictly: another declared charset is 415; bytes that
 * are not UTF-8, or a byte order mark, are 400 — rather than decoded into replacement characters
 * that would end up in stored metadata. Parsing itself is Fastify's own (prototype-poisoning
 * checks included). Plain text bodies are not taken: no route reads one.
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
      done(null, parsed);
    });
  });
}
