// The physical baseline for uploads: a bare Node HTTP server that streams each request body
// straight to a file, with no parsing, hashing or bookkeeping.
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';

const directory = process.argv[2] ?? '.';
let count = 0;
const server = createServer((request, response) => {
  const target = join(directory, `upload-${count++}.bin`);
  pipeline(request, createWriteStream(target, { flush: true })).then(
    () => response.end('{"ok":true}'),
    () => response.writeHead(500).end(),
  );
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening on ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
