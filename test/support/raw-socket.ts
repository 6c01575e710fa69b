import { request } from 'node:http';
import { connect } from 'node:net';

export interface HttpAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/**
 * One request through node:http, path sent exactly as given (no normalisation of dot segments,
 * doubled slashes or percent-encoding, which fetch would do), failing after `timeoutMs` rather
 * than hanging.
 */
export function httpExchange(
  baseUrl: string,
  options: { method: string; path: string; headers?: Record<string, string>; body?: Buffer | string },
  timeoutMs = 10_000,
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const url = new URL(baseUrl);
    const req = request({ host: url.hostname, port: url.port, method: options.method, path: options.path, headers: options.headers ?? {} }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (chunk: Buffer) => parts.push(chunk));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString() });
      });
      res.on('error', reject);
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer to ${options.method} ${options.path} within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.end(options.body);
  });
}

/**
 * Writes bytes as they are onto a fresh TCP connection and reads one HTTP/1.1 answer: for
 * requests node:http refuses to send (malformed request lines and headers, conflicting framing).
 * `endAfterWrite` half-closes the connection once the bytes are written (a client that gives up).
 */
export function socketExchange(baseUrl: string, bytes: Buffer | string, options: { timeoutMs?: number; endAfterWrite?: boolean } = {}): Promise<HttpAnswer> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const url = new URL(baseUrl);
    const socket = connect({ host: url.hostname, port: Number(url.port), allowHalfOpen: true });
    const received: Buffer[] = [];
    let settled = false;
    const finish = (error?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) return reject(error);
      try {
        resolve(parseAnswer(Buffer.concat(received)));
      } catch (problem) {
        reject(problem as Error);
      }
    };
    const timer = setTimeout(() => finish(new Error(`no complete answer within ${timeoutMs} ms: ${JSON.stringify(Buffer.concat(received).toString())}`)), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk);
      if (isComplete(Buffer.concat(received))) finish();
    });
    socket.on('end', () => finish());
    socket.on('close', () => finish());
    socket.on('error', (error) => (received.length > 0 ? finish() : finish(error)));
    socket.write(bytes, () => {
      if (options.endAfterWrite) socket.end();
    });
  });
}

function splitHead(data: Buffer): { head: string; body: Buffer } | undefined {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  return { head: data.subarray(0, end).toString('latin1'), body: data.subarray(end + 4) };
}

function isComplete(data: Buffer): boolean {
  const split = splitHead(data);
  if (!split) return false;
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(split.head);
  return length !== null && split.body.length >= Number(length[1]);
}

function parseAnswer(data: Buffer): HttpAnswer {
  const split = splitHead(data);
  if (!split) throw new Error(`not an HTTP answer: ${JSON.stringify(data.toString())}`);
  const [statusLine, ...lines] = split.head.split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '');
  if (!status) throw new Error(`not an HTTP status line: ${JSON.stringify(statusLine)}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = headers['content-length'];
  const body = length !== undefined ? split.body.subarray(0, Number(length)) : split.body;
  return { status: Number(status[1]), headers, body: body.toString() };
}
