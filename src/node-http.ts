import { createRequire } from 'node:module';

/**
 * node:http, loaded with require rather than import. Node builds an ES module's view of a builtin
 * by reading every one of its exports, and node:http's lazy WebSocket, CloseEvent and MessageEvent
 * then load Node's bundled undici (fetch, WebSocket, web streams): about 13 MiB of resident memory,
 * 4.5 MiB of it V8 heap, in a process that has no use for them (bench/FINDINGS.md, memory). Code
 * that does need fetch loads it when it first calls it.
 */
export const nodeHttp = createRequire(import.meta.url)('node:http') as typeof import('node:http');
