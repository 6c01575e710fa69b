import type { Rejection } from '../domain/rejection.js';

/**
 * An error answered with the envelope of spec §7: {error: {message, type, param, code}}, all
 * strings (param is '' when no single request field is concerned).
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly statusCode: number,
    message: string,
    readonly type: string,
    readonly code: string,
    readonly param = '',
  ) {
    super(message);
  }

  toBody() {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const invalidRequest = (message: string, param = '', code = 'invalid_value') =>
  new ApiError(400, message, 'invalid_request_error', code, param);

export const notFound = (message: string, param = '') => new ApiError(404, message, 'invalid_request_error', 'not_found', param);

export const tooLarge = (message: string, param = '') => new ApiError(413, message, 'invalid_request_error', 'file_too_large', param);

export function fromRejection(rejection: Rejection): ApiError {
  switch (rejection.kind) {
    case 'not_found':
      return notFound(rejection.message, rejection.param);
    case 'conflict':
      return new ApiError(409, rejection.message, 'invalid_request_error', 'conflict', rejection.param);
    case 'precondition_failed':
      return new ApiError(400, rejection.message, 'invalid_request_error', 'precondition_failed', rejection.param);
    case 'invalid':
      return invalidRequest(rejection.message, rejection.param);
    case 'invalid_state':
      // 400, not 409: the official clients retry a 409, and this will not change by retrying.
      return invalidRequest(rejection.message, rejection.param, 'invalid_state');
  }
}
