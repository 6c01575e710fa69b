import type { IncomingMessage, Server, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import type { HttpTimeouts } from './http-settings.js';

/** The limits checked this often at least: a short limit (in tests, say) is applied promptly. */
const CHECK_EVERY_MS = 30_000;

/**
 * Server options that keep slow clients from holding connections: a limit on the headers, on
 * the whole request (from its first byte to the end of its body), and on idle keep-alive
 * connections. Node answers those limits through the server's clientError handler
 * (answerClientError in error-handler.ts), in the JSON error envelope.
 */
export function slowClientOptions(timeouts: HttpTimeouts) {
  const http: ServerOptions = {
    headersTimeout: timeouts.headersMs,
    requestTimeout: timeouts.requestMs,
    connectionsCheckingInterval: Math.max(100, Math.min(CHECK_EVERY_MS, Math.floor(timeouts.headersMs / 4))),
  };
  return {
    http,
    requestTimeout: timeouts.requestMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    connectionTimeout: timeouts.idleMs,
  };
}

/**
 * The idle limit (connectionTimeout) applies while a request is being received and while a
 * response is not being read: a client that stops sending its body, or stops reading, is cut off.
 * A request received whole and waiting for its answer (a long inference) is not idle: the engine
 * timeout bounds it.
 */
export function limitIdleClients(server: Server): void {
  const current = new WeakMap<Socket, IncomingMessage>();
  server.on('request', (request: IncomingMessage, response) => {
    current.set(request.socket, request);
    response.once('finish', () => {
      if (current.get(request.socket) === request) current.delete(request.socket);
    });
  });
  server.on('timeout', (socket: Socket) => {
    const request = current.get(socket);
    const awaitingItsAnswer = request !== undefined && request.complete && socket.writableLength === 0;
    if (!awaitingItsAnswer) socket.destroy();
  });
}
