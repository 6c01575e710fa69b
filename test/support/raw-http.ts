import { request } from 'node:http';

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** How many body bytes the client had written when the answer's headers arrived. */
  bytesSentWhenAnswered: number;
  bytesSent: number;
}

/**
 * Sends a request body chunk by chunk over a plain HTTP connection, stopping early if the server
 * answers first (as a server that cuts off an over-limit upload does).
 */
export function rawPost(
  url: string,
  headers: Record<string, string>,
  chunks: Iterable<Buffer>,
  options: { abortAfterBytes?: number } = {},
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answeredAt = -1;
    let finished = false;
    const req = request(url, { method: 'POST', headers }, (res) => {
      answeredAt = sent;
      const parts: Buffer[] = [];
      res.on('data', (chunk: Buffer) => parts.push(chunk));
      res.on('end', () => {
        finished = true;
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(parts).toString(),
          bytesSentWhenAnswered: answeredAt,
          bytesSent: sent,
        });
      });
    });
    req.on('error', (error) => {
      if (!finished && answeredAt < 0) reject(error);
    });
    const iterator = chunks[Symbol.iterator]();
    const pump = () => {
      for (;;) {
        if (answeredAt >= 0 || req.destroyed) return;
        if (options.abortAfterBytes !== undefined && sent >= options.abortAfterBytes) {
          req.destroy();
          resolve({ status: 0, headers: {}, body: '', bytesSentWhenAnswered: -1, bytesSent: sent });
          return;
        }
        const next = iterator.next();
        if (next.done) {
          req.end();
          return;
        }
        sent += next.value.length;
        if (!req.write(next.value)) {
          req.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
}

export const BOUNDARY = 'spool-test-boundary-7MA4YWxkTrZu0gW';

export function multipartHeaders(contentLength?: number): Record<string, string> {
  return {
    'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
    ...(contentLength !== undefined ? { 'content-length': String(contentLength) } : {}),
  };
}

export function fieldPart(name: string, value: string): Buffer {
  return Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`);
}

export function fileHeader(filename: string, fieldName = 'file'): Buffer {
  return Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${fieldName}"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
}

export const closing = (): Buffer => Buffer.from(`\r\n--${BOUNDARY}--\r\n`);

/** `total` bytes of JSONL-looking content, in 64 KiB chunks, made as they are sent. */
export function* jsonlBytes(total: number): Generator<Buffer> {
  const line = Buffer.from('{"custom_id":"r","method":"POST","url":"/v1/chat/completions","body":{}}\n');
  const chunk = Buffer.alloc(65536);
  for (let offset = 0; offset < chunk.length; offset += line.length) line.copy(chunk, offset);
  let left = total;
  while (left > 0) {
    const size = Math.min(left, chunk.length);
    yield size === chunk.length ? chunk : chunk.subarray(0, size);
    left -= size;
  }
}
