import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BlobNotFoundError } from '../blob-store/blob-store.js';
import { SizeLimitExceededError } from '../blob-store/byte-meter.js';
import { ApiError, invalidRequest, notFound, tooLarge } from './api-error.js';

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
    if (error.validation && error.validationContext !== 'body') {
      const where = LOCATIONS[error.validationContext ?? ''] ?? String(error.validationContext);
      return reply.status(422).send({
        detail: error.validation.map((problem) => {
          const params = problem.params as { missingProperty?: string; additionalProperty?: string };
          const field = params.missingProperty ?? params.additionalProperty ?? problem.instancePath.replace(/^\//, '');
          return {
            loc: [where, ...field.split('/').filter(Boolean)],
            msg: `${field || where} ${problem.message ?? 'is invalid'}`,
            type: `value_error.${problem.keyword}`,
          };
        }),
      });
    }
    const answer = toApiError(error);
    // Answering before the body was read (an upload cut off): close the connection rather than
    // read and discard whatever the client still sends.
    if (!request.raw.complete) void reply.header('connection', 'close');
    if (answer.statusCode >= 500) request.log.error({ err: error }, 'request failed');
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
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    // A JSON body that breaks its schema: the envelope, naming the field and the rule it broke.
    const first = fastifyError.validation[0];
    const params = (first?.params ?? {}) as { missingProperty?: string; allowedValues?: unknown[] };
    const path = (first?.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
    if (params.missingProperty) {
      const param = path ? `${path}.${params.missingProperty}` : params.missingProperty;
      return invalidRequest(`Missing required parameter: ${param}`, param, 'missing_required_parameter');
    }
    const allowed = params.allowedValues ? `: ${params.allowedValues.map((value) => JSON.stringify(value)).join(', ')}` : '';
    return invalidRequest(`Invalid ${path || 'body'}: ${first?.message ?? 'is invalid'}${allowed}`, path);
  }
  const code = fastifyError.code ?? '';
  if (code === 'FST_REQ_FILE_TOO_LARGE') return tooLarge('File is too large', 'file');
  if (MULTIPART_CODES.has(code) || /multipart|boundary|unexpected end of form|malformed part header/i.test(error.message)) {
    return invalidRequest(`Malformed multipart/form-data body: ${error.message}`, 'file', 'invalid_multipart');
  }
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return tooLarge('Request body is too large', '');
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new ApiError(415, 'Unsupported Content-Type', 'invalid_request_error', 'unsupported_media_type');
  }
  const status = fastifyError.statusCode ?? 500;
  if (status >= 400 && status < 500) return new ApiError(status, error.message, 'invalid_request_error', code ? code.toLowerCase() : 'invalid_request');
  return new ApiError(500, 'The server had an error while processing your request', 'server_error', 'internal_error');
}
