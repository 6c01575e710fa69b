import type { RouteOptions } from 'fastify';
import { httpSchema } from '../platform/schemas.js';

type Schema = Record<string, unknown>;

export interface RouteDocs {
  /** OpenAPI fields that a fastify schema cannot carry (multipart bodies, binary answers). */
  readonly openapi?: { requestBody?: Schema; responses?: Record<string, Schema>; operationId?: string };
}

/**
 * The service description, built from the routes as fastify registers them: the parameters,
 * bodies and answers it lists are the very schemas that validate and serialize those routes.
 */
export class OpenApiDocument {
  private readonly paths: Record<string, Record<string, Schema>> = {};
  private readonly tags = new Set<string>();

  constructor(private readonly info: { title: string; version: string; description: string }) {}

  register(route: RouteOptions): void {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).filter((method) => method !== 'HEAD');
    if (methods.length === 0 || route.url === '*' || route.url.endsWith('*')) return;
    const schema = (route.schema ?? {}) as Schema;
    const docs = ((route.config ?? {}) as RouteDocs).openapi ?? {};
    const path = route.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const parameters = [
      ...toParameters(schema.params as Schema | undefined, 'path'),
      ...toParameters(schema.querystring as Schema | undefined, 'query'),
    ];
    const responses: Record<string, Schema> = {};
    for (const [status, body] of Object.entries((schema.response ?? {}) as Record<string, Schema>)) {
      responses[status] = { description: String(body.description ?? body.title ?? 'Success'), content: { 'application/json': { schema: body } } };
    }
    Object.assign(responses, docs.responses ?? {});
    if (parameters.length > 0) {
      responses['422'] = { description: 'Malformed path or query parameters', content: { 'application/json': { schema: httpSchema('ValidationError') } } };
    }
    // Any route can refuse a request (malformed HTTP, a missing token, a bad body) in the envelope.
    responses['4XX'] ??= { description: 'Refused request', content: { 'application/json': { schema: httpSchema('ErrorEnvelope') } } };
    responses.default = { description: 'Error', content: { 'application/json': { schema: httpSchema('ErrorEnvelope') } } };
    const requestBody = schema.body
      ? { required: true, content: { 'application/json': { schema: asAccepted(schema.body as Schema) } } }
      : docs.requestBody;
    for (const tag of (schema.tags as string[] | undefined) ?? []) this.tags.add(tag);
    for (const method of methods) {
      (this.paths[path] ??= {})[method.toLowerCase()] = {
        operationId: docs.operationId ?? operationIdOf(method, path),
        ...(schema.summary ? { summary: schema.summary } : {}),
        ...(schema.description ? { description: schema.description } : {}),
        ...(schema.tags ? { tags: schema.tags } : {}),
        // An empty list says the route is public, rather than leaving it unsaid.
        security: schema.security ?? [],
        ...(parameters.length > 0 ? { parameters } : {}),
        ...(requestBody ? { requestBody } : {}),
        responses,
      };
    }
  }

  private usesScheme(name: string): boolean {
    return Object.values(this.paths).some((operations) => Object.values(operations as Record<string, { security?: Array<Record<string, unknown>> }>).some((operation) => (operation.security ?? []).some((requirement) => name in requirement)));
  }

  toJSON(): Schema {
    return {
      openapi: '3.1.0',
      info: { ...this.info, license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' } },
      // Relative: the description is right wherever the service is reached from.
      servers: [{ url: '/', description: 'This service' }],
      tags: [...this.tags].sort().map((name) => ({ name, description: TAG_DESCRIPTIONS[name] ?? name })),
      paths: this.paths,
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'API_KEY, for /mgmt/v1 and /compat/v1' },
          // Only where some route takes it: /v1 with ACCOUNTS=required (with accounts off /v1 takes no credential).
          ...(this.usesScheme('accountKey') ? { accountKey: { type: 'http', scheme: 'bearer', description: "An account's key, for /v1 (ACCOUNTS=required)" } } : {}),
        },
      },
    };
  }
}

const TAG_DESCRIPTIONS: Record<string, string> = {
  files: 'OpenAI-compatible Files API',
  batches: 'OpenAI-compatible Batches API',
  audit: 'The events behind each file, batch and job',
  jobs: 'Job definitions reserved by operators (bearer API_KEY)',
  accounts: "Accounts and their keys, opened by operators (bearer API_KEY); with ACCOUNTS=required each /v1 request names an account's key",
  weights: 'Weight sync onto the fleet (bearer API_KEY)',
  compat: 'Real-time OpenAI-compatible inference (bearer API_KEY)',
  system: 'Health and this description',
};

/** getV1FilesFileIdContent for GET /v1/files/{file_id}/content: unique, since method and path are. */
function operationIdOf(method: string, path: string): string {
  const words = path.split(/[^A-Za-z0-9]+/).filter(Boolean);
  return method.toLowerCase() + words.map((word) => word[0]!.toUpperCase() + word.slice(1)).join('');
}

/**
 * A JSON body as the service accepts it: the validator removes unknown properties instead of
 * refusing them (as OpenAI ignores them), so the description must not say they are refused.
 */
function asAccepted(schema: Schema): Schema {
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== 'object') return node;
    const entries = Object.entries(node as Schema)
      .filter(([key, value]) => !(key === 'additionalProperties' && value === false))
      .map(([key, value]) => [key, walk(value)]);
    return Object.fromEntries(entries);
  };
  return walk(schema) as Schema;
}

function toParameters(schema: Schema | undefined, where: 'path' | 'query'): Schema[] {
  if (!schema) return [];
  const required = new Set((schema.required as string[] | undefined) ?? []);
  return Object.entries((schema.properties ?? {}) as Record<string, Schema>).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || required.has(name),
    ...(property.description ? { description: property.description } : {}),
    schema: property,
  }));
}

declare module 'fastify' {
  interface FastifySchema {
    summary?: string;
    description?: string;
    tags?: string[];
    security?: Array<Record<string, string[]>>;
  }
}
