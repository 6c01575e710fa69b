// The project's JSON Schemas, schemas/<folder>/<name>.json: loaded with references to other schema
// files inlined, compiled by the Ajv instances here (nothing else in the project holds one), and
// what a value gets wrong told in one wording, `<where>: <instancePath> <message>; …`, whether it
// is an event, a message or a configured file.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { schemasDir } from './package-root.js';

export type Schema = Record<string, unknown>;

/** http: requests and answers; events: one file per event type and version; messages: the message log's; config: the configured files. */
export type SchemaFolder = 'http' | 'events' | 'messages' | 'config';

/** A compiled schema; after a failed check, `errors` holds what the value got wrong. */
export type SchemaValidator<T = unknown> = ValidateFunction<T>;

/** One thing a value got wrong, as the validator reports it. */
export type SchemaProblem = ErrorObject;

// ajv-formats is CommonJS: its default export arrives wrapped under ES module interop.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

/** Events, messages, configured files and upload form fields: strict schemas, every problem named. */
const checking = addFormats(new Ajv({ allErrors: true, strict: true }));

/**
 * Request parts, with no type coercion: a JSON body is what the client sent (`{"k": 1}` is not the
 * string "1", `["x"]` is not "x"). Unknown properties are dropped rather than refused (the official
 * clients add fields of their own), defaults fill what is left out, and the first problem answers.
 */
const requests = addFormats(new Ajv({ coerceTypes: false, useDefaults: true, removeAdditional: true, allErrors: false, strict: false }));

const loaded = new Map<string, Schema>();
const compiled = new Map<string, SchemaValidator>();

/**
 * A schema file, with references to other schema files ({"$ref": "File.json"} beside it, or
 * {"$ref": "../http/File.json"} in another folder) inlined: the routes validate and serialize with
 * it, /openapi.json is generated from it. A copy: the caller may change it.
 */
export function schemaFile(folder: SchemaFolder, name: string): Schema {
  const key = `${folder}/${name}`;
  let schema = loaded.get(key);
  if (!schema) {
    const raw = JSON.parse(readFileSync(join(schemasDir, folder, `${name}.json`), 'utf8')) as Schema;
    schema = inlineReferences(raw, folder) as Schema;
    loaded.set(key, schema);
  }
  return structuredClone(schema);
}

export const httpSchema = (name: string): Schema => schemaFile('http', name);

/** The names of a folder's schema files (without `.json`), sorted. */
export function schemaNames(folder: SchemaFolder): string[] {
  return readdirSync(join(schemasDir, folder))
    .filter((name) => name.endsWith('.json'))
    .map((name) => name.slice(0, -'.json'.length))
    .sort();
}

const FILE_REFERENCE = /^(?:\.\.\/(http|events|messages|config)\/)?([A-Za-z][A-Za-z0-9.-]*)\.json$/;

function inlineReferences(node: unknown, folder: SchemaFolder): unknown {
  if (Array.isArray(node)) return node.map((item) => inlineReferences(item, folder));
  if (node === null || typeof node !== 'object') return node;
  const object = node as Schema;
  const reference = typeof object.$ref === 'string' ? FILE_REFERENCE.exec(object.$ref) : null;
  if (reference) return schemaFile((reference[1] as SchemaFolder | undefined) ?? folder, reference[2]!);
  return Object.fromEntries(Object.entries(object).map(([key, value]) => [key, inlineReferences(value, folder)]));
}

/** A schema file compiled for checking, once per process. */
export function compiledSchemaFile<T>(folder: SchemaFolder, name: string): SchemaValidator<T> {
  const key = `${folder}/${name}`;
  let validate = compiled.get(key);
  if (!validate) {
    validate = checking.compile(schemaFile(folder, name));
    compiled.set(key, validate);
  }
  return validate as SchemaValidator<T>;
}

/** A schema built in code, compiled for checking: every problem named. */
export const compileSchema = <T>(schema: Schema): SchemaValidator<T> => checking.compile<T>(schema);

/** A request part's schema, compiled for the HTTP routes (see `requests` above). */
export const compileRequestSchema = (schema: Schema): SchemaValidator => requests.compile(schema);

/** Each problem as `<instancePath> <message>`, the whole value's path being `/`. */
export function schemaProblems(errors: readonly SchemaProblem[] | null | undefined): string[] {
  return (errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message ?? 'is invalid'}`);
}

/** `<where>: <problem>; <problem>`: the one wording of a value that breaks its schema. */
export const describeMismatch = (where: string, problems: readonly string[]): string => `${where}: ${problems.join('; ')}`;

/**
 * A configured JSON file (JOBS_FILE, FLEET_FILE) checked against its schema in schemas/config.
 * Every problem is named in one error that starts with the setting and the path, so the start
 * stops saying which file and which field to fix.
 */
export function readJsonFile<T>(path: string, schema: string, setting: string): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new Error(`${setting} ${path} cannot be read as JSON: ${(error as Error).message}`);
  }
  const validate = compiledSchemaFile<T>('config', schema);
  if (!validate(parsed)) throw new Error(describeMismatch(`${setting} ${path}`, schemaProblems(validate.errors)));
  return parsed;
}
