import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchema, FastifySchemaCompiler } from 'fastify';

// ajv-formats is CommonJS: its default export arrives wrapped under ES module interop.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

/**
 * One Ajv for every part of a request, with no type coercion: a JSON body is what the client sent
 * (`{"k": 1}` is not the string "1", `["x"]` is not "x"). Unknown properties are dropped rather
 * than refused (the official clients add fields of their own), and defaults fill what is left out.
 */
const ajv = addFormats(new Ajv({ coerceTypes: false, useDefaults: true, removeAdditional: true, allErrors: false, strict: false }));

/** A decimal integer as written in a query string: digits, an optional minus, nothing else. */
const INTEGER_TEXT = /^-?[0-9]{1,15}$/;

type Properties = Record<string, { type?: string | string[] }>;

/**
 * Query strings and path parameters arrive as text, so the integers the schema declares are
 * parsed here, strictly: `10` is 10, while `10abc`, `1.5`, `0x10`, `1e3`, ` 10` and a repeated
 * parameter (an array) stay as they are and fail the schema.
 */
function withIntegersParsed(schema: FastifySchema, validate: ValidateFunction) {
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

export const compileRequestValidator: FastifySchemaCompiler<FastifySchema> = ({ schema, httpPart }) => {
  const validate = ajv.compile(schema as object);
  if (httpPart === 'querystring' || httpPart === 'params') return withIntegersParsed(schema, validate) as never;
  return validate;
};
