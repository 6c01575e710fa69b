import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_API_KEY, type WholeService, startTestService } from './support/service.js';

// Every protected route is walked with the path spellings that a router may decode or normalise
// differently from a string test on the raw URL. Each must be refused (401) or not found (404):
// never served without the bearer token.

interface Answer {
  status: number;
  body: string;
}

/** A request whose path goes on the wire exactly as given (fetch would normalise it first). */
function send(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, method, path, headers: { ...headers, ...(body ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}) } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (chunk: Buffer) => parts.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString() }));
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${method} ${path}`)));
    req.on('error', reject);
    req.end(body);
  });
}

function isEnvelope(body: string): boolean {
  try {
    const error = (JSON.parse(body) as { error?: Record<string, unknown> }).error;
    return !!error && ['message', 'type', 'param', 'code'].every((field) => typeof error[field] === 'string');
  } catch {
    return false;
  }
}

/** Spellings of one path that must not reach its handler without a token. */
export function pathVariants(path: string): string[] {
  const segments = path.split('/').slice(1);
  const encodeChar = (text: string, index: number, upper = false) => {
    const hex = text.charCodeAt(index).toString(16);
    return `${text.slice(0, index)}%${upper ? hex.toUpperCase() : hex}${text.slice(index + 1)}`;
  };
  const variants = new Set<string>([path, `${path}/`, `/${path}`, path.replace('/v1/', '//v1/'), `${path.replace(/\/$/, '')}//`]);
  segments.forEach((segment, index) => {
    if (!/^[a-z]/i.test(segment)) return;
    const encoded = [...segments];
    encoded[index] = encodeChar(segment, 0);
    variants.add(`/${encoded.join('/')}`);
    encoded[index] = encodeChar(segment, segment.length - 1, true);
    variants.add(`/${encoded.join('/')}`);
    const cased = [...segments];
    cased[index] = segment.toUpperCase();
    variants.add(`/${cased.join('/')}`);
    cased[index] = segment[0]!.toUpperCase() + segment.slice(1);
    variants.add(`/${cased.join('/')}`);
  });
  variants.add(`/v1/..${path}`);
  variants.add(`/v1/%2e%2e${path}`);
  variants.add(`/x/./..${path}`);
  variants.add(path.replace(/^\/(\w+)\//, '/$1/./'));
  variants.add(path.replace(/^\/(\w+)\//, '/$1/v1/../'));
  variants.add(`${path};x=1`);
  variants.add(`${path}?next=/v1/files`);
  variants.add(`${path}#frag`);
  variants.add(path.replace(/^\/(\w+)/, '/%2F$1'));
  variants.add(`/%2e${path}`);
  return [...variants];
}

describe('authentication follows the route, not the spelling of the URL', () => {
  let service: WholeService;
  let routes: Array<{ method: string; path: string }>;

  beforeAll(async () => {
    service = await startTestService();
    const description = (await (await fetch(`${service.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    routes = Object.entries(description.paths).flatMap(([path, operations]) =>
      Object.keys(operations).map((method) => ({
        method: method.toUpperCase(),
        // OpenAPI templates become concrete, well-formed values.
        path: path.replace('{model}', 'spool-tiny'),
      })),
    );
  });
  afterAll(() => service?.close());

  it('describes every /mgmt/v1 and /compat/v1 route as bearer-protected', async () => {
    const description = (await (await fetch(`${service.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, { security?: unknown[] }>> };
    const protectedOps = Object.entries(description.paths).filter(([path]) => /^\/(mgmt|compat)\//.test(path));
    expect(protectedOps.length).toBeGreaterThanOrEqual(10);
    for (const [path, operations] of protectedOps) {
      for (const [method, operation] of Object.entries(operations)) expect(operation.security, `${method} ${path}`).toEqual([{ bearer: [] }]);
    }
  });

  it('refuses every spelling of every protected route without a token, with a wrong token, and never serves it', async () => {
    const protectedRoutes = routes.filter((route) => /^\/(mgmt|compat)\//.test(route.path));
    expect(protectedRoutes.map((route) => `${route.method} ${route.path}`)).toEqual(
      expect.arrayContaining(['GET /mgmt/v1/jobs', 'POST /mgmt/v1/jobs', 'POST /mgmt/v1/weights/upload', 'POST /mgmt/v1/weights/reload', 'GET /mgmt/v1/weights/status', 'POST /compat/v1/chat/completions', 'GET /compat/v1/models']),
    );
    let tried = 0;
    const served: string[] = [];
    for (const route of protectedRoutes) {
      const methods = route.method === 'GET' ? ['GET', 'HEAD'] : [route.method];
      for (const method of methods) {
        for (const variant of pathVariants(route.path)) {
          const body = method === 'POST' ? JSON.stringify({ model: 'spool-tiny', messages: [{ role: 'user', content: 'hi' }], weights: { 'spool-tiny': 's3://b/p/' }, job_id: 'job-x', use_case: 'u', sla: '24h', price_1m_tokens: 0 }) : undefined;
          for (const headers of [{}, { authorization: 'Bearer wrong-key-0123456789' }, { authorization: `Basic ${TEST_API_KEY}` }] as Array<Record<string, string>>) {
            const answer = await send(service.url, method, variant, headers, body);
            tried += 1;
            if (answer.status !== 401 && answer.status !== 404) served.push(`${method} ${variant} ${JSON.stringify(headers)} -> ${answer.status}`);
            else if (method !== 'HEAD' && !isEnvelope(answer.body)) served.push(`${method} ${variant} -> ${answer.status}, not the error envelope: ${answer.body.slice(0, 80)}`);
          }
        }
      }
    }
    expect(served).toEqual([]);
    expect(tried).toBeGreaterThan(500);
  });

  it('still serves the canonical path with the right token', async () => {
    const answer = await send(service.url, 'GET', '/mgmt/v1/jobs', { authorization: `Bearer ${TEST_API_KEY}` });
    expect(answer.status).toBe(200);
    const models = await send(service.url, 'GET', '/compat/v1/models', { authorization: `bearer ${TEST_API_KEY}` });
    expect(models.status).toBe(200);
  });

  it('tells a caller without the token nothing of which protected routes exist', async () => {
    for (const path of ['/mgmt/v1/no-such-route', '/%6dgmt/v2/x', '/compat/v1/nothing', '/compat/']) {
      expect((await send(service.url, 'GET', path)).status, path).toBe(401);
      expect((await send(service.url, 'DELETE', path)).status, path).toBe(401);
      expect((await send(service.url, 'GET', path, { authorization: `Bearer ${TEST_API_KEY}` })).status, path).toBe(404);
    }
  });

  it('leaves /v1 open as the spec has it', async () => {
    expect((await send(service.url, 'GET', '/v1/files')).status).toBe(200);
    expect((await send(service.url, 'GET', '/%761/files')).status).toBe(200);
  });
});
