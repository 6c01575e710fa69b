import { type Server, createServer, request as forward } from 'node:http';

export interface SeenRequest {
  readonly method: string;
  readonly path: string;
  readonly range: string | undefined;
}

/**
 * A plain HTTP proxy in front of the test S3 server: it records every request (to count what a
 * validation downloads) and can answer chosen requests with an error instead (to make S3 fail).
 */
export class S3Proxy {
  private server: Server | undefined;
  readonly seen: SeenRequest[] = [];
  /** Requests matching this are answered 500 while `failures` lasts (-1: forever). */
  failWhen: ((request: SeenRequest) => boolean) | undefined;
  failures = 0;
  /** Answer bytes sent on to the client, per object path. */
  readonly bytesServed = new Map<string, number>();
  /** Requests being answered right now, and the most at once, per method. */
  readonly inFlight = new Map<string, number>();
  readonly maxInFlight = new Map<string, number>();
  url = '';

  constructor(private readonly target: string) {}

  async start(): Promise<string> {
    const target = new URL(this.target);
    this.server = createServer((incoming, outgoing) => {
      const seen = { method: incoming.method ?? 'GET', path: decodeURIComponent((incoming.url ?? '').split('?')[0]!), range: incoming.headers.range };
      this.seen.push(seen);
      if (this.failWhen?.(seen) && this.failures !== 0) {
        if (this.failures > 0) this.failures -= 1;
        incoming.resume();
        outgoing.writeHead(500, { 'content-type': 'application/xml' }).end('<Error><Code>InternalError</Code><Message>injected by the test</Message></Error>');
        return;
      }
      const now = (this.inFlight.get(seen.method) ?? 0) + 1;
      this.inFlight.set(seen.method, now);
      this.maxInFlight.set(seen.method, Math.max(now, this.maxInFlight.get(seen.method) ?? 0));
      // 'finish' comes before the client can have the last byte (so before its next request); 'close' alone when cut short.
      let done = false;
      const release = () => {
        if (!done) this.inFlight.set(seen.method, (this.inFlight.get(seen.method) ?? 1) - 1);
        done = true;
      };
      outgoing.once('finish', release).once('close', release);
      const upstream = forward(
        { host: target.hostname, port: target.port, method: incoming.method, path: incoming.url, headers: incoming.headers },
        (answer) => {
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.on('data', (chunk: Buffer) => this.bytesServed.set(seen.path, (this.bytesServed.get(seen.path) ?? 0) + chunk.length));
          answer.pipe(outgoing);
        },
      );
      upstream.on('error', () => outgoing.destroy());
      incoming.pipe(upstream);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    this.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
