import type { ChildProcess } from 'node:child_process';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { chatLine, createBatch, fileLines, waitForStatus } from './support/batch-helpers.js';
import { startSpoolCli, stop, waitForReady } from './support/processes.js';
import { TEST_API_KEY, tempDir } from './support/service.js';

/**
 * Caller-chosen s3:// locations whose bucket names are dotted or host-like, on an S3-compatible
 * endpoint given as an IP address with path-style addressing off: the AWS SDK would put the name
 * in front of the address (`localhost.localdomain.127.0.0.1`), print a stack trace to standard
 * error and fail. An image fails its line, and a weight sync fails, each with its one neutral
 * message, and nothing reaches the service's standard error. The service runs as a process of its
 * own, so that its real standard error is what is read.
 */

const HOST_LIKE_BUCKETS = ['localhost.localdomain', 'a.b.c', 'images.example.com'];
const neutralImage = (url: string) => `The image ${url} could not be fetched`;
const neutralCheckpoint = (url: string) => `The checkpoint ${url} could not be read`;
const AUTH = { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' };

describe('host-like bucket names with virtual-hosted S3 addressing (S3_FORCE_PATH_STYLE=false)', () => {
  let spool: { child: ChildProcess; url: string } | undefined;
  let stderr = '';
  let stdout = '';

  beforeAll(async () => {
    spool = await startSpoolCli(['serve'], {
      PORT: '0',
      DATA_DIR: tempDir('virtual-hosted'),
      API_KEY: TEST_API_KEY,
      AWS_ENDPOINT_URL_S3: inject('s3Endpoint'),
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      AWS_REGION: 'us-east-1',
      S3_FORCE_PATH_STYLE: 'false',
      WEIGHT_SYNC_RETRY_MS: '20',
      LOG_FORMAT: 'json',
    });
    spool.child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    spool.child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    await waitForReady(spool.url, 60_000);
  });
  afterAll(async () => {
    if (spool) await stop(spool.child);
  });

  it('the endpoint is an IP address, as the case needs', () => {
    expect(new URL(inject('s3Endpoint')).hostname).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
  });

  it('an image from such a bucket fails its line with the neutral message', async () => {
    const client = new OpenAI({ baseURL: `${spool!.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const urls = HOST_LIKE_BUCKETS.map((bucket) => `s3://${bucket}/cat.png`);
    const lines = urls.map((url, index) =>
      chatLine(`image-${index}`, '', { body: { model: 'spool-tiny', max_tokens: 2, messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url } }] }] } }),
    );
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'images.jsonl'), purpose: 'batch' });
    const created = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'job-demo' });
    const done = await waitForStatus(client, created.id, ['completed', 'failed'], 60_000);
    expect(done.request_counts).toEqual({ completed: 0, failed: urls.length, total: urls.length });
    const errors = new Map((await fileLines(client, done.error_file_id)).map((line) => [line.custom_id as string, line.error]));
    urls.forEach((url, index) => expect(errors.get(`image-${index}`)).toEqual({ code: 'image_fetch_failed', message: neutralImage(url) }));
  });

  it('a weight sync from such a bucket fails with the neutral message, its reason in the log', async () => {
    for (const bucket of HOST_LIKE_BUCKETS) {
      const location = `s3://${bucket}/checkpoints/seed1/`;
      const requested = await fetch(`${spool!.url}/mgmt/v1/weights/upload`, { method: 'POST', headers: AUTH, body: JSON.stringify({ weights: { 'spool-tiny': location } }) });
      expect(requested.status, await requested.clone().text()).toBe(202);
      const deadline = Date.now() + 30_000;
      let entry: { state: string; sync: { location: string; last_error: string | null } };
      for (;;) {
        const status = (await (await fetch(`${spool!.url}/mgmt/v1/weights/status`, { headers: AUTH })).json()) as { models: Record<string, typeof entry> };
        entry = status.models['spool-tiny']!;
        if (entry.sync.location === location && entry.state === 'failed') break;
        expect(Date.now(), JSON.stringify(entry)).toBeLessThan(deadline);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(entry.sync.last_error).toBe(neutralCheckpoint(location));
    }
    const refusals = stdout
      .split('\n')
      .filter((line) => line.includes('checkpoint could not be read'))
      .map((line) => JSON.parse(line) as { level: number; reason: string });
    expect(refusals).toHaveLength(HOST_LIKE_BUCKETS.length);
    for (const refusal of refusals) expect(refusal.reason).toMatch(/S3_FORCE_PATH_STYLE/);
  });

  it('nothing reached standard error: no stack trace, no "Failed to construct URL"', async () => {
    // Whatever the SDK would print comes with the failure; a moment for the pipe to deliver it.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(stderr).not.toMatch(/Failed to construct URL|Invalid URL|\n\s+at /);
    expect(stderr).toBe('');
  });
});
