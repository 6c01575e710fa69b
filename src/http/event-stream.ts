import type { FastifyReply } from 'fastify';

export interface EventStreamMessage {
  /** What a reconnecting client sends back as Last-Event-ID; absent where a stream cannot resume. */
  readonly id?: string;
  readonly event: string;
  readonly data: unknown;
}

/**
 * A server-sent-events answer (text/event-stream) written straight to the socket: messages with
 * an id (a reconnecting client sends the last as Last-Event-ID), a heartbeat comment while quiet,
 * and `closed`, aborted when the client goes away or the stream is ended.
 */
export class EventStreamResponse {
  private readonly ending = new AbortController();
  private readonly heartbeat: NodeJS.Timeout;

  /** A comment every `heartbeatMs` keeps proxies and load balancers from closing a quiet stream. */
  constructor(private readonly reply: FastifyReply, heartbeatMs: number) {
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      // nginx buffers answers unless told not to; a stream must reach the client as written.
      'x-accel-buffering': 'no',
      'x-request-id': String(reply.request.id),
    });
    raw.flushHeaders();
    raw.once('close', () => this.end());
    this.heartbeat = setInterval(() => {
      if (raw.writableLength === 0) raw.write(': heartbeat\n\n');
    }, heartbeatMs);
    this.heartbeat.unref();
  }

  /** Aborted once the stream is over, whichever side ended it. */
  get closed(): AbortSignal {
    return this.ending.signal;
  }

  /** Writes the messages in one write; resolves when the client has room for more (backpressure). */
  async send(messages: readonly EventStreamMessage[]): Promise<void> {
    if (this.closed.aborted || messages.length === 0) return;
    const text = messages.map((message) => `${message.id === undefined ? '' : `id: ${message.id}\n`}event: ${message.event}\ndata: ${JSON.stringify(message.data)}\n\n`).join('');
    if (this.reply.raw.write(text)) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        this.reply.raw.off('drain', done);
        this.closed.removeEventListener('abort', done);
        resolve();
      };
      this.reply.raw.once('drain', done);
      this.closed.addEventListener('abort', done);
    });
  }

  end(): void {
    if (this.closed.aborted) return;
    clearInterval(this.heartbeat);
    this.ending.abort();
    if (!this.reply.raw.writableEnded) this.reply.raw.end();
  }
}
