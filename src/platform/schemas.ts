import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { schemasDir } from './package-root.js';

export type Schema = Record<string, unknown>;
const cache = new Map<string, Schema>();

/**
 * A schema from schemas/http, with references to sibling files ({"$ref": "File.json"}) inlined:
 * the routes validate and serialize with it, /openapi.json is generated from it, and the
 * application checks JOBS_FILE's entries with the same request schema.
 */
export function httpSchema(name: string): Schema {
  let schema = cache.get(name);
  if (!schema) {
    const raw = JSON.parse(readFileSync(join(schemasDir, 'http', `${name}.json`), 'utf8')) as Schema;
    schema = inlineReferences(raw) as Schema;
    cache.set(name, schema);
  }
  return structuredClone(schema);
}

function inlineReferences(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(inlineReferences);
  if (node === null || typeof node !== 'object') return node;
  const object = node as Schema;
  if (typeof object.$ref === 'string' && /^[A-Za-z]+\.json$/.test(object.$ref)) {
    return httpSchema(object.$ref.replace(/\.json$/, ''));
  }
  return Object.fromEntries(Object.entries(object).map(([key, value]) => [key, inlineReferences(value)]));
}

/**
 * A configured JSON file (JOBS_FILE, FLEET_FILE) checked against its schema. Every problem is
 * named in one error that starts with the setting and the path, so the start stops saying which
 * file and which field to fix.
 */
export function readJsonFile<T>(path: string, schema: Schema, setting: string): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new Error(`${setting} ${path} cannot be read as JSON: ${(error as Error).message}`);
  }
  const validate = new Ajv({ allErrors: true, strict: false }).compile<T>(schema);
  if (!validate(parsed)) {
    throw new Error(`${setting} ${path}: ${(validate.errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message}`).join('; ')}`);
  }
  return parsed;
}
