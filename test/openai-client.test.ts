import { writeFileSync } from 'node:fs';
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../src/service.js';
import { startTestService, tempDir } from './support/service.js';

/** The official openai package, unmodified, pointed at {base_url}/v1 with a placeholder key. */
describe('the official openai client against the Files API', () => {
  let service: RunningService;
  let client: OpenAI;

  beforeAll(async () => {
    service = await startTestService({ limits: { maxFileBytes: 1024 * 1024, maxBatchFileBytes: 512 * 1024 } });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder-not-used', maxRetries: 0 });
  });
  afterAll(async () => {
    await service.close();
  });

  it('creates, retrieves, downloads and deletes a file', async () => {
    const path = join(tempDir('openai'), 'requests.jsonl');
    const content = [1, 2, 3]
      .map((n) => JSON.stringify({ custom_id: `r${n}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'm', messages: [] } }))
      .join('\n');
    writeFileSync(path, content);

    const created = await client.files.create({ file: createReadStream(path), purpose: 'batch' });
    expect(created).toMatchObject({ object: 'file', filename: 'requests.jsonl', purpose: 'batch', bytes: Buffer.byteLength(content) });
    expect(created.expires_at).toBe(created.created_at + 30 * 86400);

    expect(await client.files.retrieve(created.id)).toEqual(created);
    const download = await client.files.content(created.id);
    expect(await download.text()).toBe(content);

    expect(await client.files.delete(created.id)).toEqual({ id: created.id, object: 'file', deleted: true });
    await expect(client.files.retrieve(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('sends expires_after the way the SDK encodes it', async () => {
    const created = await client.files.create({
      file: await toFile(Buffer.from('{"a":1}\n'), 'short-lived.jsonl'),
      purpose: 'user_data',
      expires_after: { anchor: 'created_at', seconds: 7200 },
    });
    expect(created.expires_at).toBe(created.created_at + 7200);
  });

  it('auto-paginates files.list across several pages with a small limit', async () => {
    const ids: string[] = [];
    for (let index = 0; index < 7; index++) {
      ids.push((await client.files.create({ file: await toFile(Buffer.from(`${index}`), `page-${index}.txt`), purpose: 'evals' })).id);
    }
    const listed: string[] = [];
    let pages = 0;
    for await (const page of (await client.files.list({ limit: 2, purpose: 'evals' })).iterPages()) {
      pages += 1;
      listed.push(...page.data.map((file) => file.id));
    }
    expect(pages).toBe(4);
    expect(listed).toEqual([...ids].reverse());

    const all: string[] = [];
    for await (const file of client.files.list({ limit: 3, order: 'asc', purpose: 'evals' })) all.push(file.id);
    expect(all).toEqual(ids);
  });

  it('surfaces the service errors as the SDK error classes', async () => {
    await expect(client.files.retrieve('file-doesnotexist')).rejects.toMatchObject({
      status: 404,
      error: { code: 'not_found', param: 'file_id' },
    });
    const tooBig = client.files.create({ file: await toFile(Buffer.alloc(600 * 1024, 65), 'big.jsonl'), purpose: 'batch' });
    await expect(tooBig).rejects.toMatchObject({ status: 413, error: { code: 'file_too_large', param: 'file' } });
    await expect(
      client.files.create({ file: await toFile(Buffer.from('x'), 'x.txt'), purpose: 'homework' as 'batch' }),
    ).rejects.toMatchObject({ status: 400, error: { param: 'purpose' } });
  });
});
