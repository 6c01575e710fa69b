import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { censorCredentials } from '../src/observability/credential-censor.js';
import { packageRoot } from '../src/platform/package-root.js';
import { startNode, stop } from './support/processes.js';
import { TEST_API_KEY, startTestService, tempDir } from './support/service.js';

const SECRET = 'sk-never-in-a-log-0123456789';

/** Uploads a small file with the key in its Authorization header (the upload parser logs the request's headers at trace). */
async function upload(url: string): Promise<void> {
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob(['{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}\n']), 'input.jsonl');
  const response = await fetch(`${url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${TEST_API_KEY}`, cookie: `session=${SECRET}` }, body: form });
  expect(response.status).toBe(200);
}

describe('credentials in log lines', () => {
  it('leaves a line without credential keys as it is: the same string', () => {
    const line = '{"level":30,"time":1,"req":{"method":"POST","url":"/v1/files"},"msg":"incoming request authorization cookie"}\n';
    expect(censorCredentials(line)).toBe(line);
  });

  it('replaces the value of every authorization, proxy-authorization and cookie key, at any depth and in any letter case', () => {
    const line = `${JSON.stringify({
      level: 10,
      busboyOptions: { headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'multipart/form-data' } },
      nested: { deeper: { request: { headers: { Authorization: SECRET, 'Proxy-Authorization': SECRET } } } },
      list: [{ cookie: SECRET }, { cookie: { parts: [SECRET] } }],
      msg: 'parsing',
    })}\n`;
    const censored = censorCredentials(line);
    expect(censored).not.toContain(SECRET);
    expect(censored.endsWith('}\n')).toBe(true);
    expect(JSON.parse(censored)).toEqual({
      level: 10,
      busboyOptions: { headers: { authorization: '[redacted]', 'content-type': 'multipart/form-data' } },
      nested: { deeper: { request: { headers: { Authorization: '[redacted]', 'Proxy-Authorization': '[redacted]' } } } },
      list: [{ cookie: '[redacted]' }, { cookie: '[redacted]' }],
      msg: 'parsing',
    });
  });

  it('censors string values in a line that is not JSON', () => {
    expect(censorCredentials(`partial {"authorization":"Bearer ${SECRET}", "x":1`)).toBe('partial {"authorization":"[redacted]", "x":1');
  });

  it('spool serve logs no key at trace, though the upload parser logs the headers that carried it', async () => {
    const dataDir = tempDir('credential-censor');
    const { child, match } = await startNode(join(packageRoot, 'dist/src/process/cli.js'), ['serve'], { HOST: '127.0.0.1', PORT: '0', API_KEY: TEST_API_KEY, DATA_DIR: join(dataDir, 'data'), LOG_LEVEL: 'trace', LOG_FORMAT: 'json' }, /"url":"(http:\/\/[^"]+)"/);
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    try {
      await upload(match[1]!);
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      await stop(child);
    }
    expect(output.split('\n').filter(Boolean).length).toBeGreaterThan(5);
    expect(output).not.toContain(TEST_API_KEY);
    expect(output).not.toContain(SECRET);
    expect(output).toContain('"authorization":"[redacted]"');
  }, 60_000);

  it('a logger given from outside, which does not censor its lines, still gets no key from the HTTP layer', async () => {
    const lines: string[] = [];
    const service = await startTestService({ logger: pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) }) });
    try {
      await upload(service.url);
    } finally {
      await service.close();
    }
    const all = lines.join('');
    expect(lines.length).toBeGreaterThan(5);
    expect(all).not.toContain(TEST_API_KEY);
    expect(all).not.toContain(SECRET);
    expect(all).toContain('"authorization":"[redacted]"');
  }, 60_000);
});
