import { createRequire } from 'node:module';

/**
 * node:http, loaded with require rather than import. Node builds an ES module's view of a builtin
 * by reading every one of its exports, and node:http's lazy WebSocket, CloseEvent and MessageEvent
 * then load Node's bundled undici (fetch, WebSocket, web streams): 2.3 MiB of live heap and a
 * 763 KB source in every process, though none calls fetch unless it has webhooks, engine metrics
 * or a failing replica to check, and then loads it at that moment (a batch's peak RSS: 3-4 MiB;
 * bench/FINDINGS.md, memory).
 */
export const nodeHttp = createRequire(import.meta.url)('node:http') as typeof import('node:http');
