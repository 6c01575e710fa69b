import type { Server } from 'node:http';

/**
 * Serves a benchmark stand-in (an upstream, an object store) as a process of its own: on a free
 * loopback port it announces as `listening on PORT` (what startNode waits for), until SIGTERM.
 */
export function serveOnLoopback(server: Server): void {
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    process.stdout.write(`listening on ${typeof address === 'object' && address ? address.port : 0}\n`);
  });
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
