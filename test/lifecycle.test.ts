import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { type Server, createServer } from 'node:net';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSpoolCli, unusedPort } from './support/processes.js';
import { packageRoot } from '../src/platform/package-root.js';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { TEST_API_KEY, startTestService, tempDir, waitUntilReady } from './support/service.js';
import { runSpool } from './support/spool-cli.js';


/** What a failed start must look like: one line on stderr naming the problem, no stack trace. */
function expectOneLine(result: { code: number | null; stderr: string }, code: number, ...mentions: string[]) {
  const lines = result.stderr.trim().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(result.stderr).not.toMatch(/^\s+at /m);
  expect(result.code, result.stderr).toBe(code);
  for (const mention of mentions) expect(lines[0]).toContain(mention);
}

describe('a start that fails says why in one line, with a documented exit code', () => {
  const base = () => ({ PORT: '0', DATA_DIR: tempDir('lifecycle'), API_KEY: TEST_API_KEY, LOG_LEVEL: 'warn' });

  it('an unreachable event store: retried until the start-up deadline, then 69', async () => {
    const port = await unusedPort();
    const started = Date.now();
    const result = await runSpool(['serve'], { ...base(), LOG_LEVEL: 'info', EVENTSTORE_URL: `esdb://127.0.0.1:${port}?tls=false`, STARTUP_TIMEOUT_SECONDS: '3' });
    expectOneLine(result, 69, 'EVENTSTORE_URL', 'STARTUP_TIMEOUT_SECONDS');
    expect(Date.now() - started).toBeGreaterThanOrEqual(3000);
    // Each attempt is logged with its cause.
    const retries = result.stdout.split('\n').filter((line) => line.includes('retrying'));
    expect(retries.length).toBeGreaterThanOrEqual(2);
    expect(JSON.parse(retries[0]!)).toMatchObject({ dependency: 'event store' });
  });

  it('unreachable Kafka brokers: retried until the start-up deadline, then 69', async () => {
    const port = await unusedPort();
    const result = await runSpool(['serve', '--all'], { ...base(), KAFKA_BROKERS: `127.0.0.1:${port}`, STARTUP_TIMEOUT_SECONDS: '3' });
    expectOneLine(result, 69, 'KAFKA_BROKERS', `127.0.0.1:${port}`);
  });

  it('a HOST that cannot be listened on: 78', async () => {
    const result = await runSpool(['serve'], { ...base(), HOST: 'no-such-host.invalid' });
    expectOneLine(result, 78, 'HOST', 'no-such-host.invalid');
  });

  it('a PORT already in use: 78', async () => {
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const result = await runSpool(['serve'], { ...base(), PORT: String(port) });
      expectOneLine(result, 78, 'PORT', String(port), 'in use');
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a DATA_DIR that cannot be created: 73', async () => {
    const parent = join(tempDir('lifecycle'), 'a-file');
    writeFileSync(parent, 'not a directory');
    const result = await runSpool(['serve'], { ...base(), DATA_DIR: join(parent, 'data') });
    expectOneLine(result, 73, 'DATA_DIR', parent);
  });

  it('a JOBS_FILE or FLEET_FILE that does not exist: 78', async () => {
    const missing = join(tempDir('lifecycle'), 'missing.json');
    expectOneLine(await runSpool(['serve'], { ...base(), JOBS_FILE: missing }), 78, 'JOBS_FILE', missing);
    expectOneLine(await runSpool(['serve'], { ...base(), FLEET_FILE: missing }), 78, 'FLEET_FILE', missing);
  });

  it('a JOBS_FILE or FLEET_FILE that breaks its schema: 78, naming the field', async () => {
    const jobsFile = join(tempDir('lifecycle'), 'jobs.json');
    writeFileSync(jobsFile, JSON.stringify([{ job_id: 'job-a', model: 'spool-tiny', use_case: 'x', sla: 'soon', price_1m_tokens: 1 }]));
    expectOneLine(await runSpool(['serve'], { ...base(), JOBS_FILE: jobsFile }), 78, 'JOBS_FILE', jobsFile, '/sla');
    const fleetFile = join(tempDir('lifecycle'), 'fleet.json');
    writeFileSync(fleetFile, JSON.stringify({ models: { 'spool-tiny': { replicas: [{ kind: 'vllm' }] } } }));
    expectOneLine(await runSpool(['serve'], { ...base(), FLEET_FILE: fleetFile }), 78, 'FLEET_FILE', fleetFile, 'base_url');
  });
});

/** Collects a child's output; `waitFor` resolves once it matches. */
function watch(child: ChildProcess) {
  let output = '';
  const waiters: Array<() => void> = [];
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    for (const waiter of waiters) waiter();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.once('exit', (code) => resolve({ code, at: Date.now() })));
  return {
    get output() {
      return output;
    },
    exited,
    waitFor: (pattern: RegExp) =>
      new Promise<void>((resolve) => {
        const check = () => pattern.test(output) && resolve();
        waiters.push(check);
        check();
      }),
  };
}

describe('stopping', () => {
  const engine = new FakeEngine();
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    await engine.start();
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await engine.stop();
  });

  const env = (dataDir: string, extra: Record<string, string> = {}) => ({
    PORT: '0',
    DATA_DIR: dataDir,
    API_KEY: TEST_API_KEY,
    ENGINE_BASE_URL: engine.url,
    ENGINE_CONCURRENCY: '2',
    ENGINE_BACKOFF_MS: '10',
    BATCH_CHUNK_LINES: '100',
    LOG_LEVEL: 'info',
    ...extra,
  });

  async function start(environment: Record<string, string>) {
    // Output is watched from the first byte: the readiness wait of startSpoolCli would drop it.
    const child = spawn(process.execPath, [join(packageRoot, 'dist/src/process/cli.js'), 'serve'], { env: { PATH: process.env.PATH ?? '', ...environment }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    const output = watch(child);
    await output.waitFor(/"url":"http/);
    const url = /"url":"(http:\/\/[^"]+)"/.exec(output.output)![1]!;
    await waitUntilReady(url);
    return { child, url, output };
  }

  it('SIGINT mid-batch stops at once: lines not yet sent are left for the next start, which completes the batch', async () => {
    engine.latencyMs = 300;
    const dataDir = tempDir('lifecycle');
    let spool = await start(env(dataDir));
    expect((await reserveJob(spool.url, { job_id: 'stop-job', model: 'tiny-chat', use_case: 'stop', sla: '24h', price_1m_tokens: 1 })).status).toBe(201);
    const total = 200;
    const lines = Array.from({ length: total }, (_, index) => chatLine(`line-${index}`, `line ${index}`));
    let client = new OpenAI({ baseURL: `${spool.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'stop.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'stop-job' });
    while (engine.total < 6) await new Promise((resolve) => setTimeout(resolve, 20));

    // Two chunks of 100 lines at 2 × 300 ms: finishing them would take about 30 s.
    const signalled = Date.now();
    spool.child.kill('SIGINT');
    const exit = await spool.output.exited;
    expect(exit.code).toBe(0);
    expect(exit.at - signalled).toBeLessThan(5000);
    expect(spool.output.output).toMatch(/"waiting_for":/);
    expect(engine.total).toBeLessThan(total / 2);

    engine.latencyMs = 0;
    spool = await start(env(dataDir));
    client = new OpenAI({ baseURL: `${spool.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const done = await waitForStatus(client, batch.id, ['completed', 'failed'], 60_000);
    expect(done.status).toBe('completed');
    const output = await fileLines(client, done.output_file_id);
    expect(new Set(output.map((line) => line.custom_id))).toEqual(new Set(lines.map((_, index) => `line-${index}`)));
    expect(output).toHaveLength(total);
    spool.child.kill('SIGTERM');
    await spool.output.exited;
  }, 90_000);

  async function startWithStuckRequest(extra: Record<string, string>) {
    engine.latencyMs = 0;
    const spool = await start(env(tempDir('lifecycle'), extra));
    const before = engine.inFlight;
    // A real-time request the engine takes a minute to answer.
    const stuck = fetch(`${spool.url}/compat/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-chat', messages: [{ role: 'user', content: 'think hard [slow:60000]' }] }),
    }).catch(() => undefined);
    while (engine.inFlight <= before) await new Promise((resolve) => setTimeout(resolve, 20));
    return { spool, stuck };
  }

  it('gives up waiting after SHUTDOWN_TIMEOUT_SECONDS, saying what it waited for, and exits 75', async () => {
    const { spool } = await startWithStuckRequest({ SHUTDOWN_TIMEOUT_SECONDS: '2' });
    const signalled = Date.now();
    spool.child.kill('SIGINT');
    const exit = await spool.output.exited;
    expect(exit.code).toBe(75);
    expect(exit.at - signalled).toBeGreaterThanOrEqual(2000);
    expect(exit.at - signalled).toBeLessThan(4000);
    expect(spool.output.output).toMatch(/"waiting_for":\[[^\]]*"1 HTTP request/);
    expect(spool.output.output).toContain('SHUTDOWN_TIMEOUT_SECONDS');
  }, 30_000);

  it('a second SIGINT exits at once with 130', async () => {
    const { spool } = await startWithStuckRequest({ SHUTDOWN_TIMEOUT_SECONDS: '60' });
    spool.child.kill('SIGINT');
    await spool.output.waitFor(/"msg":"stopping"/);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const signalled = Date.now();
    spool.child.kill('SIGINT');
    const exit = await spool.output.exited;
    expect(exit.code).toBe(130);
    expect(exit.at - signalled).toBeLessThan(1000);
  }, 30_000);
});

describe('readiness', () => {
  it('/ready and /live show no path, host name or address of the deployment', async () => {
    const dataDir = tempDir('lifecycle');
    const { child, url } = await startSpoolCli(['serve'], { PORT: '0', DATA_DIR: dataDir, API_KEY: TEST_API_KEY, LOG_LEVEL: 'info' });
    try {
      await waitUntilReady(url);
      for (const path of ['/ready', '/live']) {
        const text = await (await fetch(`${url}${path}`)).text();
        expect(text, path).not.toContain(dataDir);
        expect(text, path).not.toContain('127.0.0.1');
        expect(text, path).not.toMatch(/\/tmp|\/var|\/home|\/srv/);
      }
    } finally {
      child.kill('SIGTERM');
    }
  });
});

describe('degraded but serving', () => {
  it('/ready stays 200 and names a model whose every replica is down', async () => {
    const service = await startTestService({ env: { ENGINE_BASE_URL: `http://127.0.0.1:${await unusedPort()}/v1`, ENGINE_MAX_ATTEMPTS: '1', ENGINE_COOLDOWN_MS: '600000' } });
    try {
      expect(await (await fetch(`${service.url}/ready`)).json()).toMatchObject({ status: 'ready', degraded: [] });
      const refused = await fetch(`${service.url}/compat/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'elsewhere', messages: [{ role: 'user', content: 'hello' }] }),
      });
      expect(refused.status).toBeGreaterThanOrEqual(500);
      const ready = await fetch(`${service.url}/ready`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({ status: 'degraded', degraded: ['model *: no healthy replica'] });
    } finally {
      await service.close();
    }
  });
});
