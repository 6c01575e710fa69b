import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { type Browser, type Page, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { S3BlobStore } from '../src/blob-store/s3-blob-store.js';
import { packageRoot } from '../src/platform/package-root.js';
import { createS3Client } from '../src/platform/s3-client.js';
import { createBatch, reserveJob, waitFor, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { TEST_API_KEY, type WholeService, startTestService, tempDir } from './support/service.js';
import { stageInS3 } from './support/staged-checkpoint.js';
import { ACCESSIBILITY_PROBLEMS } from './support/accessibility-check.js';

// The console at /console, driven in Debian's Chromium (headless, through playwright-core) against
// the real service over HTTP. `.ci/run` installs Chromium from Debian's packages; where it is not
// installed this suite says so and skips. Screenshots are kept in .cache/test-artifacts/console.
// The slow model is served by FakeEngine, a stand-in for an OpenAI-compatible server (no GPU here).

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`console.test.ts skipped: no Chromium at ${CHROMIUM} (install Debian's chromium, or set CHROMIUM_PATH)`);

const artifacts = join(packageRoot, '.cache', 'test-artifacts', 'console');

const lines = (count: number, model: string, prefix = 'q') =>
  `${Array.from({ length: count }, (_, index) => JSON.stringify({ custom_id: `${prefix}${index}`, method: 'POST', url: '/v1/chat/completions', body: { model, messages: [{ role: 'user', content: `line ${index}` }], max_tokens: 8 } })).join('\n')}\n`;

describe.skipIf(!haveChromium)('the console, in a real browser', () => {
  let service: WholeService;
  let engine: FakeEngine;
  let browser: Browser;
  let page: Page;
  let client: OpenAI;
  const pageErrors: string[] = [];
  const accessibilityProblems = (page: Page) => page.evaluate<string[]>(ACCESSIBILITY_PROBLEMS);
  const shot = (name: string) => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
  const badgeOf = (batchId: string) => page.locator(`tr[data-batch="${batchId}"] td:nth-child(2) .badge`);

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    engine = new FakeEngine();
    // Each answer takes 1.5 s and the fleet sends it two at a time: a batch of this model runs for minutes.
    engine.latencyMs = 1500;
    await engine.start();
    const fleetFile = join(tempDir('console-fleet'), 'fleet.json');
    writeFileSync(fleetFile, JSON.stringify({ models: { 'spool-tiny': { replicas: [{ kind: 'builtin' }] }, 'slow-chat': { replicas: [{ kind: 'openai', base_url: engine.url, concurrency: 2 }] } } }));
    process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
    process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
    service = await startTestService({
      env: { FLEET_FILE: fleetFile, AWS_ENDPOINT_URL_S3: inject('s3Endpoint'), AWS_REGION: 'us-east-1', S3_FORCE_PATH_STYLE: 'true', WEIGHT_SYNC_RETRY_MS: '20' },
    });
    for (const job of [
      { job_id: 'job-console', model: 'spool-tiny', use_case: 'console test', sla: '24h', price_1m_tokens: 2 },
      // 200 lines at 1.5 s, two at a time, cannot end within this SLA: the console calls the batch at risk.
      { job_id: 'job-slow', model: 'slow-chat', use_case: 'console test', sla: '120s', price_1m_tokens: 1 },
    ]) {
      expect((await reserveJob(service.url, job)).ok).toBe(true);
    }
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    page = await (await browser.newContext({ acceptDownloads: true, viewport: { width: 1400, height: 900 } })).newPage();
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    // The browser logs each refused fetch as an error; the console expects some (401 before the key is given).
    page.on('console', (message) => {
      if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) pageErrors.push(message.text());
    });
  });
  afterAll(async () => {
    await browser?.close();
    await service?.close();
    await engine?.stop();
  });

  it('shows a batch submitted through the API appear and reach completed, at most a second behind the API', async () => {
    await page.goto(`${service.url}/console`);
    await page.getByRole('heading', { name: 'Batches', level: 1 }).waitFor();
    await page.getByRole('status').filter({ hasText: 'Live' }).waitFor({ timeout: 10_000 });

    const file = await client.files.create({ file: await toFile(Buffer.from(lines(20, 'spool-tiny')), 'console.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-console', metadata: { note: '<img src=x onerror="window.pwned=1">' } });
    await badgeOf(batch.id).waitFor({ timeout: 5_000 });

    // When the API first says completed, and when the page does: the page follows the change stream.
    const apiCompleted = waitForStatus(client, batch.id, ['completed'], 60_000).then(() => Date.now());
    // Runs in the page (its CSP allows no string evaluation): the document is the browser's.
    const shows = (id: string) => (globalThis as any).document.querySelector(`tr[data-batch="${id}"] td:nth-child(2) .badge`)?.textContent === 'completed';
    await page.waitForFunction(shows, batch.id, { timeout: 60_000, polling: 20 });
    const pageCompleted = Date.now();
    const lag = pageCompleted - (await apiCompleted);
    expect(lag, `the page showed completed ${lag} ms after the API`).toBeLessThan(1_000);

    const row = page.locator(`tr[data-batch="${batch.id}"]`);
    await expect.poll(() => row.locator('td').nth(3).textContent()).toBe('20 / 20');
    expect(await row.locator('td').nth(6).textContent()).toBe('job-console');
    expect(await row.locator('td').nth(5).textContent()).toBe('spool-tiny');
    expect(Number((await row.locator('td').nth(7).textContent())!.replace(/,/g, ''))).toBeGreaterThan(0);
    expect(await row.locator('td').nth(8).textContent()).toMatch(/^\$\d/);
    expect(await row.locator('progress').getAttribute('value')).toBe('20');
    await shot('batches');
    expect(await accessibilityProblems(page)).toEqual([]);

    // Its page: summary, metadata shown as text (never run), timeline, files, lines by custom_id.
    await row.getByRole('link', { name: batch.id }).click();
    await page.getByRole('heading', { name: `Batch ${batch.id}` }).waitFor();
    await page.locator('#batch-status .badge', { hasText: 'completed' }).waitFor();
    expect(await page.locator('#batch-metadata').textContent()).toBe('note: <img src=x onerror="window.pwned=1">');
    expect(await page.evaluate(() => (globalThis as any).pwned)).toBeUndefined();
    const timeline = page.locator('#batch-timeline li strong');
    await expect.poll(() => timeline.allTextContents()).toEqual(expect.arrayContaining(['BatchCreated', 'BatchValidated', 'BatchCompleted']));
    expect(await timeline.allTextContents()).not.toContain('LineCompleted');

    await page.getByLabel('File').selectOption('output_file_id');
    await page.getByLabel('custom_id contains').fill('q17');
    await page.getByRole('button', { name: 'Show lines' }).click();
    await page.locator('#line-results tbody tr').first().waitFor();
    expect(await page.locator('#line-results tbody tr').evaluateAll((rows) => rows.map((tr) => tr.getAttribute('data-custom-id')))).toEqual(['q17']);
    await page.locator('#line-results summary').click();
    expect(JSON.parse((await page.locator('#line-results pre').textContent())!)).toMatchObject({ custom_id: 'q17', response: { status_code: 200 } });

    const downloading = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Download output file' }).click();
    const saved = join(artifacts, 'output.jsonl');
    await (await downloading).saveAs(saved);
    expect(readFileSync(saved, 'utf8').trim().split('\n')).toHaveLength(20);
    await shot('batch');
    expect(await accessibilityProblems(page)).toEqual([]);
  });

  it('cancels a running batch from its page', async () => {
    const file = await client.files.create({ file: await toFile(Buffer.from(lines(200, 'slow-chat', 's')), 'slow.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-slow' });
    await page.goto(`${service.url}/console#/batches/${batch.id}`);
    await page.locator('#batch-status .badge', { hasText: 'in_progress' }).waitFor({ timeout: 30_000 });
    await page.locator('#batch-summary .badge.warn', { hasText: /^at risk: ends about / }).waitFor({ timeout: 15_000 });
    await page.getByRole('button', { name: 'Cancel batch' }).click();
    await page.getByRole('button', { name: 'Yes, cancel this batch' }).click();
    const cancelled = await waitForStatus(client, batch.id, ['cancelled'], 30_000);
    expect(cancelled.request_counts!.total).toBe(200);
    expect(cancelled.request_counts!.completed).toBeLessThan(200);
    await page.locator('#batch-status .badge', { hasText: 'cancelled' }).waitFor({ timeout: 5_000 });
    // The lines never sent, one line for all of them.
    expect(await page.locator('#batch-errors div').allTextContents()).toEqual([`${cancelled.request_counts!.failed} × batch_cancelled: The batch was cancelled before this request was sent`]);
    await expect.poll(() => page.locator('#batch-timeline li strong').allTextContents()).toEqual(expect.arrayContaining(['BatchCancelRequested', 'BatchCancelled']));
    await shot('batch-cancelled');
  });

  it('asks for the API key where one is needed, then shows jobs, the fleet and a weight sync with its history, live', async () => {
    await page.goto(`${service.url}/console#/jobs`);
    await page.getByRole('alert').filter({ hasText: 'needs the API key' }).waitFor();
    await page.getByLabel('API key').fill(TEST_API_KEY);
    await page.getByLabel('API key').press('Enter');
    await page.locator('#jobs-body td', { hasText: 'job-slow' }).waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem('spool.apiKey'))).toBe(TEST_API_KEY);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    await shot('jobs');
    expect(await accessibilityProblems(page)).toEqual([]);

    await page.goto(`${service.url}/console#/fleet`);
    await page.locator('#fleet-replicas td', { hasText: 'slow-chat' }).first().waitFor();
    const replicas = await page.locator('#fleet-replicas tbody tr').evaluateAll((rows) => rows.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(replicas.map((cells) => cells[0])).toEqual(expect.arrayContaining(['spool-tiny', 'slow-chat']));
    for (const cells of replicas) expect(Number(cells[2])).toBeGreaterThan(0);
    expect(await page.locator('#fleet-classes td', { hasText: 'batch' }).count()).toBeGreaterThan(0);
    await shot('fleet');
    expect(await accessibilityProblems(page)).toEqual([]);

    // The weight-sync view is open while a checkpoint is staged and swapped in through the API.
    await page.goto(`${service.url}/console#/weights`);
    const section = page.locator('section[data-model="spool-tiny"]');
    await section.waitFor();
    const store = new S3BlobStore(createS3Client({ endpoint: inject('s3Endpoint'), forcePathStyle: true }), { bucket: inject('s3Bucket'), prefix: 'console-checkpoints' });
    await stageInS3(store, 'seed7', ['--seed', '7']);
    const location = `s3://${inject('s3Bucket')}/console-checkpoints/seed7/`;
    const post = (step: string) =>
      fetch(`${service.url}/mgmt/v1/weights/${step}`, { method: 'POST', headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ weights: { 'spool-tiny': location } }) });
    const state = async () => ((await (await fetch(`${service.url}/mgmt/v1/weights/status`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).json()) as { models: Record<string, any> }).models['spool-tiny'];
    expect((await post('upload')).status).toBe(202);
    await waitFor(async () => (await state()).staged?.checkpoint === location, 'the checkpoint to be staged', 30_000);
    expect((await post('reload')).status).toBe(202);
    await waitFor(async () => (await state()).serving?.checkpoint === location, 'the checkpoint to be served', 30_000);
    const history = section.locator('ol.timeline li strong');
    await expect.poll(() => history.allTextContents(), { timeout: 2_000 }).toEqual(expect.arrayContaining(['WeightsUploadRequested', 'WeightsStaged', 'WeightsReloadRequested', 'WeightsReloaded']));
    expect(await section.textContent()).toContain(`spool-tiny/0: ${location}`);
    await shot('weights');
    expect(await accessibilityProblems(page)).toEqual([]);
  });

  it('is used with the keyboard alone: skip link, sections, and Enter on a link', async () => {
    await page.goto('about:blank');
    await page.goto(`${service.url}/console#/batches`);
    await page.getByRole('heading', { name: 'Batches', level: 1 }).waitFor();
    const focused: string[] = [];
    for (let i = 0; i < 9; i++) {
      await page.keyboard.press('Tab');
      focused.push(await page.evaluate(() => {
        const active = (globalThis as any).document.activeElement;
        return (active?.getAttribute('aria-label') || active?.textContent?.trim() || active?.id || '') as string;
      }));
    }
    expect(focused[0]).toBe('Skip to content');
    expect(focused).toEqual(expect.arrayContaining(['Batches', 'Files', 'Jobs', 'Fleet', 'Weight syncs', 'api-key']));
    // The focus is on the sections' links in order: back to "Files" and Enter.
    await page.getByRole('link', { name: 'Files' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Files', level: 1 }).waitFor();
    expect(page.url()).toMatch(/#\/files$/);
    await page.locator('#files-body td', { hasText: 'console.jsonl' }).first().waitFor();
    await shot('files');
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});

describe('the change stream', () => {
  let service: WholeService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service?.close();
  });

  it('names what changed, as server-sent events; the management stream needs the key', async () => {
    expect((await fetch(`${service.url}/mgmt/v1/changes`)).status).toBe(401);
    const controller = new AbortController();
    const response = await fetch(`${service.url}/v1/changes`, { signal: controller.signal });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let received = '';
    const until = async (text: string) => {
      while (!received.includes(text)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the stream ended before ${text}: ${received}`);
        received += value;
      }
    };
    await until('event: ready\n');
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const file = await client.files.create({ file: await toFile(Buffer.from('{}\n'), 'notes.jsonl'), purpose: 'user_data' });
    await until(`"file:${file.id}"`);
    expect(received).toMatch(new RegExp(`event: changed\\ndata: \\{"subjects":\\[[^\\]]*"file:${file.id}"`));
    controller.abort();
  });
});

describe.skipIf(!haveChromium)('the console with accounts required, in a real browser', () => {
  let service: WholeService;
  let browser: Browser;

  beforeAll(async () => {
    service = await startTestService({ env: { ACCOUNTS: 'required' } });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  });
  afterAll(async () => {
    await browser?.close();
    await service?.close();
  });

  it("shows an account's own batches, live, with the account's key, and no other account's", async () => {
    const mgmt = (path: string, body: unknown) =>
      fetch(`${service.url}/mgmt/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const accounts: Record<string, OpenAI> = {};
    const keys: Record<string, string> = {};
    for (const name of ['north', 'south']) {
      const opened = (await (await mgmt('/accounts', { account_id: name })).json()) as { key: string };
      keys[name] = opened.key;
      expect((await mgmt('/jobs', { job_id: `${name}-job`, model: 'spool-tiny', use_case: 'console', sla: '24h', price_1m_tokens: 1, account_id: name })).status).toBe(201);
      accounts[name] = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: opened.key, maxRetries: 0 });
    }
    const submit = async (name: string) => {
      const client = accounts[name]!;
      const file = await client.files.create({ file: await toFile(Buffer.from(lines(3, 'spool-tiny', name)), `${name}.jsonl`), purpose: 'batch' });
      return createBatch(client, { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: `${name}-job` });
    };
    const southBatch = await submit('south');
    const page = await browser.newPage();
    await page.goto(`${service.url}/console`);
    await page.getByRole('alert').filter({ hasText: 'needs the API key' }).waitFor();
    await page.getByLabel('API key').fill(keys.north!);
    await page.getByLabel('API key').press('Enter');
    await page.getByRole('status').filter({ hasText: 'Live' }).waitFor({ timeout: 10_000 });
    // Submitted after the page follows: it appears without a reload, and reaches completed.
    const northBatch = await submit('north');
    await page.locator(`tr[data-batch="${northBatch.id}"] .badge`, { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    await waitForStatus(accounts.south!, southBatch.id, ['completed']);
    expect(await page.locator('tbody tr').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-batch')))).toEqual([northBatch.id]);
    await page.close();
  });
});
