import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { schemasDir } from '../package-root.js';

type Schema = Record<string, unknown>;
const cache = new Map<string, Schema>();

/**
 * A schema from schemas/http, with references to sibling files ({"$ref": "File.json"}) inlined:
 * the routes validate and serialize with it, and /openapi.json is generated from it.
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
