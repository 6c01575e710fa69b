import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BlobNotFoundError } from '../blob-store/blob-store.js';
import { EventStoreUnavailableError } from '../event-store/event-store.js';
import { SizeLimitExceededError } from '../blob-store/byte-meter.js';
import { ApiError, invalidRequest, notFound, tooLarge } from './api-error.js';
import { nodeHttp } from '../platform/node-http.js';
import type { SchemaProblem } from '../platform/schemas.js';
import { bodyRefusal, parameterRefusal } from './schema-refusals.js';
import { isOutOfSpace } from '../platform/storage-space.js';

/** The code of a request refused because the service's storage is full (507). */
export const INSUFFICIENT_STORAGE = 'insufficient_storage';

const LOCATIONS: Record<string, string> = { querystring: 'query', params: 'path', headers: 'header', body: 'body' };

/** Multipart framing problems reported by @fastify/multipart and busboy. */
const MULTIPART_CODES = new Set([
  'FST_INVALID_MULTIPART_CONTENT_TYPE',
  'FST_PROTO_VIOLATION',
  'FST_FILES_LIMIT',
  'FST_FIELDS_LIMIT',
  'FST_PARTS_LIMIT',
  'FST_REQ_FILE_TOO_LARGE',
]);

/** Path or query parameters that cannot even be read, answered with the 422 validation shape. */
export class MalformedParametersError extends Error {
  override readonly name = 'MalformedParametersError';
  constructor(
    readonly location: 'path' | 'query',
    readonly problems: ReadonlyArray<{ readonly name: string; readonly problem: string; readonly rule: string }>,
  ) {
    super(`Malformed ${location} parameters`);
  }

  toBody() {
    return {
      detail: this.problems.map(({ name, problem, rule }) => ({
        loc: name ? [this.location, name] : [this.location],
        msg: `${name || this.location} ${problem}`,
        type: `value_error.${rule}`,
      })),
    };
  }
}

/**
 * Every error leaves as JSON: the spec's envelope, or for malformed path and query parameters the
 * validation shape with 422. Nothing of a stack or an internal message reaches the client.
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setNotFoundHandler((request, reply) => {
    const error = notFound(`Unknown route: ${request.method} ${request.url.split('?')[0]}`);
    void reply.status(404).send(error.toBody());
  });

  app.setErrorHandler((raw: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) => {
    const error = raw as FastifyError;
    if (error instanceof MalformedParametersError) return reply.status(422).send(error.toBody());
    if (error.validation && error.validationContext !== 'body') {
      const where = LOCATIONS[error.validationContext ?? ''] ?? String(error.validationContext);
      return reply.status(422).send(parameterRefusal(where, error.validation as SchemaProblem[]));
    }
    const answer = toApiError(error);
    // Answering before the body was read (an upload cut off): close the connection rather than
    // read and discard whatever the client still sends.
    if (!request.raw.complete) void reply.header('connection', 'close');
    // What clients wait before trying a 503 again (the OpenAI clients read it).
    if (answer.statusCode === 503) void reply.header('retry-after', '1');
    // Only the unexpected (500) is a defect with a stack. The other 5xx are conditions: a full storage
    // (logged once per episode where the write was refused), not ready yet, the event store away.
    if (answer.statusCode === 500) request.log.error({ err: error }, 'request failed');
    else if (answer.statusCode > 500 && answer.code !== INSUFFICIENT_STORAGE) request.log.warn({ reason: error.message, code: answer.code }, 'request refused: the service cannot serve it just now');
    else request.log.info({ err: { message: error.message, code: error.code } }, 'request refused');
    return reply.status(answer.statusCode).send(answer.toBody());
  });
}

export function toApiError(error: FastifyError | Error): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof SizeLimitExceededError) {
    return tooLarge(`File is too large: the ${error.limitName} is ${error.limitBytes} bytes`, 'file');
  }
  if (error instanceof BlobNotFoundError) return notFound('No such File object', 'file_id');
  if (error instanceof EventStoreUnavailableError) {
    return new ApiError(503, 'The service cannot reach its event store just now; try again shortly', 'service_unavailable', 'event_store_unavailable');
  }
  if (isOutOfSpace(error)) {
    return new ApiError(507, 'The service is out of storage space: nothing of this request was kept; try again once space is freed', 'server_error', INSUFFICIENT_STORAGE);
  }
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) return bodyRefusal(fastifyError.validation[0] as SchemaProblem | undefined);
  const code = fastifyError.code ?? '';
  if (code === 'FST_FILES_LIMIT') {
    return invalidRequest('Only one file per upload: send the content once, as the field "file"', 'file', 'duplicate_parameter');
  }
  if (code === 'FST_REQ_FILE_TOO_LARGE') return tooLarge('File is too large', 'file');
  if (MULTIPART_CODES.has(code) || /multipart|boundary|unexpected end of form|malformed part header/i.test(error.message)) {
    return invalidRequest(`Malformed multipart/form-data body: ${error.message}`, 'file', 'invalid_multipart');
  }
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return tooLarge('Request body is too large', '');
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new ApiError(415, 'Unsupported Content-Type', 'invalid_request_error', 'unsupported_media_type');
  }
  const status = fastifyError.statusCode ?? 500;
  // Fastify's own codes (FST_ERR_…) name its internals, not the client's mistake.
  if (status >= 400 && status < 500) return new ApiError(status, error.message, 'invalid_request_error', code && !code.startsWith('FST_') ? code.toLowerCase() : 'invalid_request');
  return new ApiError(500, 'The server had an error while processing your request', 'server_error', 'internal_error');
}

/**
 * The longest path parameter the router passes on to validation. The schemas allow ids of 128
 * characters and model names of 256; percent-encoded, a character may take up to 12. Anything
 * longer is refused by the router itself (see answerFrameworkError).
 */
export const MAX_PATH_PARAMETER_LENGTH = 4096;

/**
 * Fastify's `frameworkErrors`: a path the router cannot decode, or a path parameter longer than
 * the router takes. Both are malformed path parameters: the 422 validation shape.
 */
export function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  request.log.info({ err: { message: error.message, code: error.code } }, 'request refused');
  if (error.code === 'FST_ERR_BAD_URL') {
    void reply.status(422).send(new MalformedParametersError('path', [{ name: '', problem: 'is not valid percent-encoded UTF-8', rule: 'url_encoding' }]).toBody());
    return;
  }
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    void reply
      .status(422)
      .send(new MalformedParametersError('path', [{ name: '', problem: `has a parameter longer than ${MAX_PATH_PARAMETER_LENGTH} characters`, rule: 'max_length' }]).toBody());
    return;
  }
  const answer = toApiError(error);
  void reply.status(answer.statusCode).send(answer.toBody());
}


/** What Node's HTTP parser reports, in the envelope's terms. */
function describeClientError(error: NodeJS.ErrnoException & { reason?: string }): { status: number; code: string; message: string } {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: 'request_timeout', message: 'The request was not received in time (HTTP_HEADERS_TIMEOUT_SECONDS, HTTP_REQUEST_TIMEOUT_SECONDS)' };
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: 'headers_too_large', message: 'The request headers are larger than the server takes' };
    case 'HPE_INVALID_METHOD':
      return { status: 400, code: 'malformed_request', message: 'Unknown HTTP method' };
    default:
      return { status: 400, code: 'malformed_request', message: `Malformed HTTP request${error.reason ? `: ${error.reason}` : ''}` };
  }
}

/**
 * Node's `clientError`: the request could not be parsed (bad request line, headers, framing) or
 * did not arrive in time. No request object exists, so the envelope is written as a raw HTTP/1.1
 * answer and the connection closed, as it cannot be read any further.
 */
export function answerClientError(error: NodeJS.ErrnoException & { reason?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // A response already under way on this connection cannot be followed by another.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (!socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const { status, code, message } = describeClientError(error);
  const body = JSON.stringify(new ApiError(status, message, 'invalid_request_error', code).toBody());
  socket.end(
    `HTTP/1.1 ${status} ${nodeHttp.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
  // A client that never reads its answer does not keep the socket.
  setTimeout(() => socket.destroy(), 1000).unref();
}

/** An Expect header other than 100-continue: Node would answer 417 with no body. */
export function answerUnmetExpectation(app: FastifyInstance): void {
  app.server.on('checkExpectation', (request, response) => {
    const body = JSON.stringify(
      new ApiError(417, `Unsupported Expect header ${JSON.stringify(request.headers.expect)}: only 100-continue is understood`, 'invalid_request_error', 'expectation_failed').toBody(),
    );
    response.writeHead(417, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' });
    response.end(body);
  });
}
