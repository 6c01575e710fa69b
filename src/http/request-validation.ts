import type { FastifySchema, FastifySchemaCompiler } from 'fastify';
import { type Schema, type SchemaValidator, compileRequestSchema } from '../platform/schemas.js';

/** A decimal integer as written in a query string: digits, an optional minus, nothing else. */
const INTEGER_TEXT = /^-?[0-9]{1,15}$/;

type Properties = Record<string, { type?: string | string[] }>;

/**
 * Query strings and path parameters arrive as text, so the integers the schema declares are
 * parsed here, strictly: `10` is 10, while `10abc`, `1.5`, `0x10`, `1e3`, ` 10` and a repeated
 * parameter (an array) stay as they are and fail the schema.
 */
function withIntegersParsed(schema: FastifySchema, validate: SchemaValidator) {
  const properties = ((schema as { properties?: Properties }).properties ?? {}) as Properties;
  const integers = Object.entries(properties)
    .filter(([, property]) => property.type === 'integer' || (Array.isArray(property.type) && property.type.includes('integer')))
    .map(([name]) => name);
  return (data: unknown) => {
    const parsed: Record<string, unknown> = { ...((data ?? {}) as Record<string, unknown>) };
    for (const name of integers) {
      const value = parsed[name];
      if (typeof value === 'string' && INTEGER_TEXT.test(value)) parsed[name] = Number(value);
    }
    return validate(parsed) ? { value: parsed } : { error: validate.errors ?? [] };
  };
}

/** Every part of a request is checked without type coercion (see compileRequestSchema). */
export const compileRequestValidator: FastifySchemaCompiler<FastifySchema> = ({ schema, httpPart }) => {
  const validate = compileRequestSchema(schema as Schema);
  if (httpPart === 'querystring' || httpPart === 'params') return withIntegersParsed(schema, validate) as never;
  return validate;
};
