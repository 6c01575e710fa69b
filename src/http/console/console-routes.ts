import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { packageRoot } from '../../platform/package-root.js';

/** The console's files, shipped in the package beside this module's source: nothing comes from elsewhere. */
const ASSETS_DIR = join(packageRoot, 'src', 'http', 'console', 'assets');

const ASSETS = {
  'console.js': 'text/javascript; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
} as const;

/**
 * Scripts and styles from this origin only, no inline code, no framing: the page shows what users
 * wrote (custom_ids, metadata, answers), and a policy this strict keeps any of it from running.
 */
const CONTENT_SECURITY_POLICY = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const read = (name: string) => readFileSync(join(ASSETS_DIR, name));

/**
 * The live console at /console: one page of plain JavaScript over the service's own API (the
 * lists, the audit trail, /v1/changes for live updates, /metrics for the fleet). Files are read
 * once, at the first request for each.
 */
export function registerConsoleRoutes(app: FastifyInstance): void {
  const cache = new Map<string, Buffer>();
  const asset = (name: string) => {
    let body = cache.get(name);
    if (!body) cache.set(name, (body = read(name)));
    return body;
  };
  const html = { openapi: { responses: { 200: { description: 'The console page', content: { 'text/html': { schema: { type: 'string' } } } } } } };
  const file = { openapi: { responses: { 200: { description: "The console's script or style sheet", content: { 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } } } } } } };

  app.get('/console', { schema: { summary: 'The live console: batches, files, jobs, the fleet and weight syncs, in a browser', tags: ['system'] }, config: html }, async (_request, reply) =>
    reply.type('text/html; charset=utf-8').header('content-security-policy', CONTENT_SECURITY_POLICY).header('cache-control', 'no-cache').send(asset('index.html')),
  );
  app.get(
    '/console/:asset',
    {
      schema: {
        summary: "The console's script and style sheet",
        tags: ['system'],
        params: { type: 'object', additionalProperties: false, required: ['asset'], properties: { asset: { type: 'string', enum: Object.keys(ASSETS) } } },
      },
      config: file,
    },
    async (request, reply) => {
      const name = (request.params as { asset: keyof typeof ASSETS }).asset;
      return reply.type(ASSETS[name]).header('cache-control', 'no-cache').header('x-content-type-options', 'nosniff').send(asset(name));
    },
  );
}
