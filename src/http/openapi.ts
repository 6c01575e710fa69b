import type { RouteOptions } from 'fastify';
import { httpSchema } from '../schemas.js';

type Schema = Record<string, unknown>;

export interface RouteDocs {
  /** OpenAPI fields that a fastify schema cannot carry (multipart bodies, binary answers). */
  readonly openapi?: { requestBody?: Schema; responses?: Record<string, Schema> };
}

/**
 * The service description, built from the routes as fastify registers them: the parameters,
 * bodies and answers it lists are the very schemas that validate and serialize those routes.
 */
export class OpenApiDocument {
  private readonly paths: Record<string, Record<string, Schema>> = {};

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
    responses.default = { description: 'Error', content: { 'application/json': { schema: httpSchema('ErrorEnvelope') } } };
    const requestBody = schema.body
      ? { required: true, content: { 'application/json': { schema: schema.body } } }
      : docs.requestBody;
    for (const method of methods) {
      (this.paths[path] ??= {})[method.toLowerCase()] = {
        ...(schema.summary ? { summary: schema.summary } : {}),
        ...(schema.description ? { description: schema.description } : {}),
        ...(schema.tags ? { tags: schema.tags } : {}),
        ...(schema.security ? { security: schema.security } : {}),
        ...(parameters.length > 0 ? { parameters } : {}),
        ...(requestBody ? { requestBody } : {}),
        responses,
      };
    }
  }

  toJSON(): Schema {
    return {
      openapi: '3.1.0',
      info: this.info,
      paths: this.paths,
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'API_KEY, for /mgmt/v1 and /compat/v1' } },
      },
    };
  }
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
