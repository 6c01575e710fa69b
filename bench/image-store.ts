// A fast S3 stand-in for the image benchmark, run as its own process:
//   node dist/bench/image-store.js MIB
// Answers every GetObject (path-style, any bucket and key) with the same MIB-mebibyte PNG held in
// memory, honouring Range as S3 does, and HeadBucket with its region. s3rver reads each object
// from disk; this one keeps the store out of the figures. GET /stats: objects served, bytes sent,
// the most GETs answered at once.
import { createServer } from 'node:http';
import { serveOnLoopback } from './loopback-server.js';

const mib = Number(process.argv[2] ?? 8);
const image = Buffer.alloc(mib * 1024 * 1024, 7);
Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(image);

let served = 0;
let bytes = 0;
let active = 0;
let maxActive = 0;

const server = createServer((request, response) => {
  request.resume();
  const path = (request.url ?? '/').split('?')[0]!;
  if (path === '/stats') {
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ served, bytes, maxActive }));
    return;
  }
  const [, bucket, ...key] = path.split('/');
  if (request.method === 'HEAD' && key.length === 0) {
    response.writeHead(200, { 'x-amz-bucket-region': 'us-east-1' }).end();
    return;
  }
  if (request.method !== 'GET' || !bucket || key.length === 0) {
    response.writeHead(404, { 'content-type': 'application/xml' }).end('<Error><Code>NoSuchKey</Code><Message>no</Message></Error>');
    return;
  }
  const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.range ?? '');
  const start = range ? Number(range[1]) : 0;
  const end = range && range[2] ? Math.min(Number(range[2]), image.length - 1) : image.length - 1;
  const body = image.subarray(start, end + 1);
  active += 1;
  maxActive = Math.max(maxActive, active);
  served += 1;
  bytes += body.length;
  response.once('close', () => (active -= 1));
  response.writeHead(range ? 206 : 200, {
    'content-type': 'image/png',
    'content-length': body.length,
    ...(range ? { 'content-range': `bytes ${start}-${end}/${image.length}` } : {}),
  });
  response.end(body);
});
serveOnLoopback(server);
