import type { FastifyInstance } from 'fastify';
import { ApiError, invalidRequest } from './api-error.js';
import { MalformedParametersError } from './error-handler.js';

/** The name of each query parameter whose name or value is not valid percent-encoded UTF-8. */
export function badlyEncodedQueryParameters(url: string): string[] {
  const start = url.indexOf('?');
  if (start < 0) return [];
  const bad: string[] = [];
  for (const pair of url.slice(start + 1).split('&')) {
    if (pair === '') continue;
    const [name = '', value = ''] = pair.split(/=(.*)/s);
    const decode = (text: string) => decodeURIComponent(text.replace(/\+/g, ' '));
    let decodedName: string | undefined;
    try {
      decodedName = decode(name);
      decode(value);
    } catch {
      bad.push(decodedName ?? '');
    }
  }
  return bad;
}

/**
 * What the schemas cannot see, checked on every request before its body is read: a query string
 * that does not decode (the parser would pass the raw text on as if it were a value), a
 * compressed body (never decompressed here, so refused rather than misread), and an HTTP/1.1
 * request without Host.
 */
export function installRequestChecks(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      throw invalidRequest('HTTP/1.1 requests must carry a Host header', '', 'malformed_request');
    }
    const bad = badlyEncodedQueryParameters(request.url);
    if (bad.length > 0) throw new MalformedParametersError('query', bad.map((name) => ({ name, problem: 'is not valid percent-encoded UTF-8', rule: 'url_encoding' })));
    const encoding = request.headers['content-encoding']?.trim().toLowerCase();
    if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
      throw new ApiError(415, `Unsupported Content-Encoding ${JSON.stringify(encoding)}: send the body uncompressed`, 'invalid_request_error', 'unsupported_content_encoding');
    }
  });
}
