import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { waitUntil } from './support/batch-helpers.js';
import { startSpoolCli, stop, waitForReady } from './support/processes.js';

const work = mkdtempSync(join(tmpdir(), 'spool-undici-'));
const report = join(work, 'report');
// Loaded into the process under test: on SIGUSR2 (or at exit) it writes whether Node's bundled
// undici (fetch, WebSocket) has been loaded, and which of Node's modules came just before it.
const probe = join(work, 'probe.mjs');
writeFileSync(
  probe,
  `import { renameSync, writeFileSync } from 'node:fs';
const tell = () => {
  const loaded = process.moduleLoadList;
  const at = loaded.indexOf('NativeModule internal/deps/undici/undici');
  // Written aside and renamed: the test reads the report as soon as it exists.
  writeFileSync(${JSON.stringify(`${report}.partial`)}, JSON.stringify({ loaded: at >= 0, after: at >= 0 ? loaded.slice(Math.max(0, at - 4), at) : [] }));
  renameSync(${JSON.stringify(`${report}.partial`)}, ${JSON.stringify(report)});
};
process.on('SIGUSR2', tell);
if (process.env.PROBE_AT_EXIT) process.once('exit', tell);
`,
);

async function reported(): Promise<{ loaded: boolean; after: string[] }> {
  await waitUntil(() => existsSync(report), 10_000);
  expect(existsSync(report), 'the probe reported').toBe(true);
  const answer = JSON.parse(readFileSync(report, 'utf8')) as { loaded: boolean; after: string[] };
  rmSync(report);
  return answer;
}

describe("Node's bundled undici", () => {
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('is loaded by an ES import of node:http (what the probe sees when it is there)', async () => {
    await promisify(execFile)(process.execPath, ['--import', probe, '--input-type=module', '-e', "import 'node:http';"], { env: { PATH: process.env.PATH ?? '', PROBE_AT_EXIT: '1' } });
    expect((await reported()).loaded).toBe(true);
  });

  // 2.3 MiB of live heap (bench/FINDINGS.md, memory) that a service with no webhooks, no engine
  // metrics URL and no failing HTTP replica has no use for.
  it('is not loaded by `spool serve` on the embedded default, started, uploaded to and asked for what is not there', async () => {
    const { child, url } = await startSpoolCli(['serve'], { PORT: '0', DATA_DIR: join(work, 'data'), API_KEY: 'undici-api-key-0123456789' }, ['--import', probe]);
    try {
      await waitForReady(url, 30_000);
      const headers = { authorization: 'Bearer undici-api-key-0123456789' };
      const form = new FormData();
      form.append('purpose', 'batch');
      form.append('file', new Blob(['{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[]}}\n']), 'input.jsonl');
      expect((await fetch(`${url}/v1/files`, { method: 'POST', headers, body: form })).status).toBe(200);
      expect((await fetch(`${url}/v1/files/file-absent`, { headers })).status).toBe(404);
      child.kill('SIGUSR2');
      expect(await reported()).toEqual({ loaded: false, after: [] });
    } finally {
      await stop(child);
    }
  }, 60_000);
});
