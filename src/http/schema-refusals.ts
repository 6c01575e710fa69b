// How a request that breaks its schema is answered, in the two shapes the API promises: a body
// or form field names the first field and the rule it broke in the error envelope (400); path and
// query parameters list every problem in the validation shape (422).
import type { SchemaProblem } from '../platform/schemas.js';
import { type ApiError, invalidRequest } from './api-error.js';

/** A JSON body or an upload form's fields that break their schema: the envelope, naming the field and the rule it broke. */
export function bodyRefusal(problem: SchemaProblem | undefined): ApiError {
  const params = (problem?.params ?? {}) as { missingProperty?: string; allowedValues?: unknown[] };
  const path = (problem?.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
  if (params.missingProperty) {
    const param = path ? `${path}.${params.missingProperty}` : params.missingProperty;
    return invalidRequest(`Missing required parameter: ${param}`, param, 'missing_required_parameter');
  }
  const allowed = params.allowedValues ? `: ${params.allowedValues.map((value) => JSON.stringify(value)).join(', ')}` : '';
  return invalidRequest(`Invalid ${path || 'body'}: ${problem?.message ?? 'is invalid'}${allowed}`, path);
}

/** Path, query or header parameters that break their schema (`where`: path, query, header): the 422 validation shape. */
export function parameterRefusal(where: string, problems: readonly SchemaProblem[]) {
  return {
    detail: problems.map((problem) => {
      const params = problem.params as { missingProperty?: string; additionalProperty?: string };
      const field = params.missingProperty ?? params.additionalProperty ?? problem.instancePath.replace(/^\//, '');
      return {
        loc: [where, ...field.split('/').filter(Boolean)],
        msg: `${field || where} ${problem.message ?? 'is invalid'}`,
        type: `value_error.${problem.keyword}`,
      };
    }),
  };
}
