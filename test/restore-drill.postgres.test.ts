import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { restartablePort } from './support/processes.js';
import { startTestService, tempDir } from './support/service.js';
import { runSpool } from './support/spool-cli.js';

// The restore drill of docs/OPERATIONS.md (Backup and restore): a batch runs on Spool over
// PostgreSQL; the database is dumped with pg_dump, restored with pg_restore into a fresh database,
// and Spool started on the restored one (a fresh DATA_DIR, the same blob store) finds the batch,
// serves its output file, and `spool replay` rebuilds identical read models from it.
//
// pg_dump refuses a server newer than itself, and the npm package the other tests start
// PostgreSQL from ships no pg_dump: the drill runs a server and tools of one PostgreSQL release
// installed on the machine (Debian's postgresql package: /usr/lib/postgresql/N/bin), and is
// skipped, saying so, where there is none.

/** The newest PostgreSQL installation here that has a server, initdb, pg_ctl, pg_dump and pg_restore. */
function installedPostgres(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const tools = ['postgres', 'initdb', 'pg_ctl', 'pg_dump', 'pg_restore'];
  return readdirSync(root)
    .filter((version) => /^\d+$/.test(version))
    .sort((a, b) => Number(b) - Number(a))
    .map((version) => join(root, version, 'bin'))
    .find((bin) => tools.every((tool) => existsSync(join(bin, tool))));
}

const bin = installedPostgres();

describe.skipIf(!bin)(`the restore drill: pg_dump, pg_restore into a fresh database, Spool on it${bin ? '' : ' (skipped: no PostgreSQL server with pg_dump installed here, /usr/lib/postgresql/N/bin)'}`, () => {
  const engine = new FakeEngine();
  const asRoot = process.getuid?.() === 0;
  // PostgreSQL will not run as root: as root, its programs run as the user postgres.
  const run = (tool: string, args: string[]) => execFileSync(asRoot ? 'runuser' : join(bin!, tool), asRoot ? ['-u', 'postgres', '--', join(bin!, tool), ...args] : args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  let dir: string;
  let port: number;
  const url = (database: string) => `postgres://spool@127.0.0.1:${port}/${database}`;

  beforeAll(async () => {
    await engine.start();
    dir = mkdtempSync(join(tmpdir(), 'spool-restore-drill-'));
    chmodSync(dir, 0o777);
    port = await restartablePort();
    run('initdb', ['-D', join(dir, 'data'), '-U', 'spool', '--auth=trust', '--locale=C', '--encoding=UTF8']);
    run('pg_ctl', ['-D', join(dir, 'data'), '-l', join(dir, 'server.log'), '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`, '-w', 'start']);
    const admin = new pg.Client({ connectionString: url('postgres') });
    await admin.connect();
    await admin.query('CREATE DATABASE spool');
    await admin.query('CREATE DATABASE spool_restored');
    await admin.end();
  }, 60_000);
  afterAll(async () => {
    await engine.stop();
    if (dir) {
      try {
        run('pg_ctl', ['-D', join(dir, 'data'), '-m', 'fast', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  it('restores a dump that Spool runs on as before, and replays into identical read models', async () => {
    const blobs = tempDir('restore-drill-blobs');
    const env = (database: string) => ({ EVENTSTORE_URL: url(database), BLOB_STORE: `file:${blobs}`, ENGINE_BASE_URL: engine.url, ENGINE_MODELS: 'tiny-chat', BATCH_CHUNK_LINES: '3' });
    const lines = Array.from({ length: 8 }, (_, line) => chatLine(`drill-${line}`, `hello ${line}`));

    const before = await startTestService({ env: env('spool') });
    let batchId: string;
    let output: Array<Record<string, any>>;
    try {
      expect((await reserveJob(before.url, { job_id: 'drill-job', model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1 })).status).toBe(201);
      const client = new OpenAI({ baseURL: `${before.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
      const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'input.jsonl'), purpose: 'batch' });
      const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'drill-job' });
      const done = await waitForStatus(client, batch.id, ['completed', 'failed', 'expired', 'cancelled'], 60_000);
      expect(done.status).toBe('completed');
      batchId = batch.id;
      output = await fileLines(client, done.output_file_id);
      expect(output).toHaveLength(8);
    } finally {
      await before.close();
    }

    // The drill, as docs/OPERATIONS.md gives it.
    const dump = join(dir, 'spool.dump');
    run('pg_dump', ['--format=custom', `--file=${dump}`, url('spool')]);
    run('pg_restore', [`--dbname=${url('spool_restored')}`, dump]);

    const after = await startTestService({ dataDir: tempDir('restore-drill-after'), env: env('spool_restored') });
    try {
      const client = new OpenAI({ baseURL: `${after.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
      const found = await client.batches.retrieve(batchId);
      expect(found).toMatchObject({ id: batchId, status: 'completed', request_counts: { total: 8, completed: 8, failed: 0 } });
      expect(await fileLines(client, found.output_file_id)).toEqual(output);
      // And it goes on working: a new append lands after the restored log.
      expect((await reserveJob(after.url, { job_id: 'drill-job-2', model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1 })).status).toBe(201);
    } finally {
      await after.close();
    }
    const replayed = await runSpool(['replay'], { DATA_DIR: after.dataDir, ...env('spool_restored'), LOG_LEVEL: 'silent' });
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(JSON.parse(replayed.stdout)).toMatchObject({ identical: true });
  }, 120_000);
});
