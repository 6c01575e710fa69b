import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../src/service.js';
import { listKeys } from './support/blob-store-contract.js';
import { BOUNDARY, closing, fieldPart, fileHeader, jsonlBytes, multipartHeaders, rawPost } from './support/raw-http.js';
import { ManualClock, startTestService, uploadFile } from './support/service.js';

type Service = RunningService & { dataDir: string };
const MIB = 1024 * 1024;

/** Events in the log and objects in the blob store, and any partial file on disk. */
async function storedState(service: Service) {
  const events = await service.eventStore.readAll({ maxCount: 1_000_000 });
  const blobs = await listKeys(service.blobStore, '');
  const partials: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) walk(join(dir, entry.name));
      else if (entry.name.endsWith('.partial')) partials.push(entry.name);
    }
  };
  walk(join(service.dataDir, 'blobs'));
  return { events: events.length, blobs, partials };
}

async function json(response: Response) {
  return (await response.json()) as Record<string, any>;
}

describe('Files API over HTTP', () => {
  let service: Service;
  const clock = new ManualClock();

  beforeAll(async () => {
    // Small limits for most tests; the real 200 MiB default has a test of its own below.
    service = await startTestService({ clock, limits: { maxFileBytes: 4 * MIB, maxBatchFileBytes: 2 * MIB } });
  });
  afterAll(async () => {
    await service.close();
  });

  describe('upload and read back', () => {
    it('stores a batch file and answers the File object of spec §2.2', async () => {
      const content = '{"custom_id":"1","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[]}}\n';
      const response = await uploadFile(service.url, { purpose: 'batch', filename: 'requests.jsonl', content });
      expect(response.status).toBe(200);
      const file = await json(response);
      expect(file).toEqual({
        id: expect.stringMatching(/^file-[0-9a-f]{24}$/),
        object: 'file',
        bytes: Buffer.byteLength(content),
        created_at: clock.seconds,
        expires_at: clock.seconds + 30 * 86400,
        filename: 'requests.jsonl',
        purpose: 'batch',
        status: 'processed',
      });

      // Read-your-writes: the file is there the moment the upload returns.
      expect(await json(await fetch(`${service.url}/v1/files/${file.id}`))).toEqual(file);
      const download = await fetch(`${service.url}/v1/files/${file.id}/content`);
      expect(download.status).toBe(200);
      expect(download.headers.get('content-type')).toBe('application/jsonl');
      expect(download.headers.get('content-length')).toBe(String(Buffer.byteLength(content)));
      expect(download.headers.get('content-disposition')).toContain('requests.jsonl');
      expect(await download.text()).toBe(content);

      const [uploaded] = (await service.eventStore.readAll({ maxCount: 1_000_000 })).filter((event) => event.data.file_id === file.id);
      expect(uploaded?.type).toBe('FileUploaded');
      expect(uploaded?.data.sha256).toBe(createHash('sha256').update(content).digest('hex'));
    });

    it('keeps files of other purposes until deleted (expires_at null)', async () => {
      for (const purpose of ['assistants', 'fine-tune', 'vision', 'user_data', 'evals']) {
        const file = await json(await uploadFile(service.url, { purpose, filename: 'x.bin', content: 'abc' }));
        expect(file.purpose).toBe(purpose);
        expect(file.expires_at).toBeNull();
      }
    });

    it('applies expires_after sent as the SDKs send it and as a JSON field', async () => {
      const bracketed = await json(
        await uploadFile(service.url, {
          purpose: 'user_data',
          content: 'a',
          fields: { 'expires_after[anchor]': 'created_at', 'expires_after[seconds]': '3600' },
        }),
      );
      expect(bracketed.expires_at).toBe(bracketed.created_at + 3600);
      const asJson = await json(
        await uploadFile(service.url, { purpose: 'batch', content: 'a', fields: { expires_after: '{"anchor":"created_at","seconds":2592000}' } }),
      );
      expect(asJson.expires_at).toBe(asJson.created_at + 2592000);
    });

    it('streams binary content back byte for byte with its length', async () => {
      const content = Buffer.from(Array.from({ length: 70_000 }, (_, index) => index % 256));
      const file = await json(await uploadFile(service.url, { purpose: 'vision', filename: 'image.png', content }));
      const download = await fetch(`${service.url}/v1/files/${file.id}/content`);
      expect(download.headers.get('content-type')).toBe('image/png');
      expect(Buffer.from(await download.arrayBuffer()).equals(content)).toBe(true);
    });
  });

  describe('listing', () => {
    let ids: string[];
    let other: Service;
    beforeAll(async () => {
      other = await startTestService({ clock });
      ids = [];
      for (let index = 0; index < 7; index++) {
        const purpose = index % 2 === 0 ? 'batch' : 'user_data';
        ids.push((await json(await uploadFile(other.url, { purpose, filename: `f${index}.jsonl`, content: `${index}` }))).id);
      }
    });
    afterAll(async () => {
      await other.close();
    });

    it('lists newest first by default, with the list shape of spec §2.3', async () => {
      const page = await json(await fetch(`${other.url}/v1/files`));
      expect(page.object).toBe('list');
      expect(page.data.map((file: { id: string }) => file.id)).toEqual([...ids].reverse());
      expect(page.first_id).toBe(ids[6]);
      expect(page.last_id).toBe(ids[0]);
      expect(page.has_more).toBe(false);
    });

    it('pages with limit and an exclusive after cursor, both orders', async () => {
      const seen: string[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await json(await fetch(`${other.url}/v1/files?limit=3&order=asc${after ? `&after=${after}` : ''}`));
        seen.push(...page.data.map((file: { id: string }) => file.id));
        if (!page.has_more) break;
        expect(page.data).toHaveLength(3);
        after = page.last_id;
      }
      expect(seen).toEqual(ids);
      const descending = await json(await fetch(`${other.url}/v1/files?limit=2&order=desc&after=${ids[4]}`));
      expect(descending.data.map((file: { id: string }) => file.id)).toEqual([ids[3], ids[2]]);
      expect(descending.has_more).toBe(true);
    });

    it('filters by purpose', async () => {
      const page = await json(await fetch(`${other.url}/v1/files?purpose=user_data&order=asc`));
      expect(page.data.map((file: { id: string }) => file.id)).toEqual([ids[1], ids[3], ids[5]]);
      const none = await json(await fetch(`${other.url}/v1/files?purpose=fine-tune-results`));
      expect(none).toEqual({ object: 'list', data: [], first_id: '', last_id: '', has_more: false });
    });

    it('refuses an unknown cursor with the error envelope', async () => {
      const response = await fetch(`${other.url}/v1/files?after=file-000000000000000000000000`);
      expect(response.status).toBe(400);
      expect((await json(response)).error).toMatchObject({ param: 'after', type: 'invalid_request_error' });
    });
  });

  describe('deletion', () => {
    it('deletes the file and its content', async () => {
      const file = await json(await uploadFile(service.url, { purpose: 'batch', content: 'to be deleted' }));
      expect(await listKeys(service.blobStore, `files/${file.id}`)).toEqual([`files/${file.id}`]);
      const response = await fetch(`${service.url}/v1/files/${file.id}`, { method: 'DELETE' });
      expect(response.status).toBe(200);
      expect(await json(response)).toEqual({ id: file.id, object: 'file', deleted: true });
      expect(await listKeys(service.blobStore, `files/${file.id}`)).toEqual([]);
      expect((await fetch(`${service.url}/v1/files/${file.id}`)).status).toBe(404);
      expect((await fetch(`${service.url}/v1/files/${file.id}/content`)).status).toBe(404);
      const again = await fetch(`${service.url}/v1/files/${file.id}`, { method: 'DELETE' });
      expect(again.status).toBe(404);
      const listed = await json(await fetch(`${service.url}/v1/files`));
      expect(listed.data.map((entry: { id: string }) => entry.id)).not.toContain(file.id);
    });
  });

  describe('errors', () => {
    it('answers an unknown file id with 404 and the error envelope, on every route', async () => {
      for (const [method, path] of [
        ['GET', '/v1/files/file-doesnotexist'],
        ['GET', '/v1/files/file-doesnotexist/content'],
        ['DELETE', '/v1/files/file-doesnotexist'],
      ] as const) {
        const response = await fetch(`${service.url}${path}`, { method });
        expect(response.status).toBe(404);
        expect(await json(response)).toEqual({
          error: { message: 'No such File object: file-doesnotexist', type: 'invalid_request_error', param: 'file_id', code: 'not_found' },
        });
      }
    });

    it('answers malformed query and path parameters with 422 and the validation shape', async () => {
      const cases: Array<[string, string[]]> = [
        ['/v1/files?limit=0', ['query', 'limit']],
        ['/v1/files?limit=10001', ['query', 'limit']],
        ['/v1/files?limit=ten', ['query', 'limit']],
        ['/v1/files?order=sideways', ['query', 'order']],
        ['/v1/files?purpose=homework', ['query', 'purpose']],
        ['/v1/files/not%20an%20id', ['path', 'file_id']],
      ];
      for (const [path, loc] of cases) {
        const response = await fetch(`${service.url}${path}`);
        expect(response.status, path).toBe(422);
        const body = await json(response);
        expect(body.detail[0].loc, path).toEqual(loc);
        expect(typeof body.detail[0].msg).toBe('string');
        expect(typeof body.detail[0].type).toBe('string');
      }
      expect((await fetch(`${service.url}/v1/files?limit=10000`)).status).toBe(200);
      expect((await fetch(`${service.url}/v1/files?limit=1`)).status).toBe(200);
    });

    it('answers unknown routes with a JSON 404, and echoes the request id', async () => {
      const response = await fetch(`${service.url}/v1/nothing-here`, { headers: { 'x-request-id': 'trace-123' } });
      expect(response.status).toBe(404);
      expect(response.headers.get('x-request-id')).toBe('trace-123');
      expect((await json(response)).error.code).toBe('not_found');
      const generated = await fetch(`${service.url}/live`);
      expect(generated.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    });
  });

  describe('bad input loses nothing and leaves nothing half-written', () => {
    async function expectRefusedCleanly(send: () => Promise<{ status: number; body: string }>, status: number, param: string) {
      const before = await storedState(service);
      const answer = await send();
      expect(answer.status).toBe(status);
      const body = JSON.parse(answer.body) as { error: { param: string; message: string; type: string; code: string } };
      expect(body.error.param).toBe(param);
      expect(body.error.message.length).toBeGreaterThan(0);
      expect(answer.body).not.toMatch(/at .*\.(ts|js):\d+/); // no stack trace
      // Give a cancelled write a moment to clean up before comparing.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await storedState(service)).toEqual(before);
      return body;
    }
    const asText = async (response: Response) => ({ status: response.status, body: await response.text() });

    it('refuses an upload without a file part', async () => {
      const body = await expectRefusedCleanly(async () => asText(await uploadFile(service.url, { purpose: 'batch' })), 400, 'file');
      expect(body.error.code).toBe('missing_required_parameter');
    });

    it('refuses an upload without a purpose, or with an unknown one before or after the file', async () => {
      await expectRefusedCleanly(async () => asText(await uploadFile(service.url, { content: 'x' })), 400, 'purpose');
      await expectRefusedCleanly(async () => asText(await uploadFile(service.url, { purpose: 'homework', content: 'x' })), 400, 'purpose');
      await expectRefusedCleanly(
        () => rawPost(`${service.url}/v1/files`, multipartHeaders(), [fileHeader('a.jsonl'), Buffer.from('abc'), Buffer.from(`\r\n`), fieldPart('purpose', 'batch_output'), Buffer.from(`--${BOUNDARY}--\r\n`)]),
        400,
        'purpose',
      );
    });

    it('cuts off an over-limit batch upload while it streams', async () => {
      const answer = await expectRefusedCleanly(
        () => rawPost(`${service.url}/v1/files`, multipartHeaders(), [fieldPart('purpose', 'batch'), fileHeader('big.jsonl'), ...jsonlBytes(64 * MIB), closing()]),
        413,
        'file',
      );
      expect(answer.error.message).toContain('input file size limit for purpose batch is 2097152 bytes');
    });

    it('reports the answer to an over-limit upload before the client has sent it all', async () => {
      const answer = await rawPost(`${service.url}/v1/files`, multipartHeaders(), [fieldPart('purpose', 'user_data'), fileHeader('big.bin'), ...jsonlBytes(64 * MIB), closing()]);
      expect(answer.status).toBe(413);
      expect(JSON.parse(answer.body).error.message).toContain('file size limit is 4194304 bytes');
      expect(answer.bytesSentWhenAnswered).toBeLessThan(32 * MIB);
    });

    it('checks the batch limit after the fact when the purpose comes after the file', async () => {
      await expectRefusedCleanly(
        () => rawPost(`${service.url}/v1/files`, multipartHeaders(), [fileHeader('late.jsonl'), ...jsonlBytes(3 * MIB), Buffer.from('\r\n'), fieldPart('purpose', 'batch'), Buffer.from(`--${BOUNDARY}--\r\n`)]),
        413,
        'file',
      );
    });

    it('refuses malformed and truncated multipart bodies', async () => {
      await expectRefusedCleanly(
        () => rawPost(`${service.url}/v1/files`, multipartHeaders(), [Buffer.from('this is not multipart at all')]),
        400,
        'file',
      );
      const truncated = await expectRefusedCleanly(
        () => rawPost(`${service.url}/v1/files`, multipartHeaders(), [fieldPart('purpose', 'batch'), fileHeader('cut.jsonl'), Buffer.from('{"custom_id":')]),
        400,
        'file',
      );
      expect(truncated.error.code).toBe('invalid_multipart');
      await expectRefusedCleanly(
        () => rawPost(`${service.url}/v1/files`, { 'content-type': 'multipart/form-data' }, [fieldPart('purpose', 'batch')]),
        400,
        'file',
      );
      await expectRefusedCleanly(
        async () => asText(await fetch(`${service.url}/v1/files`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"purpose":"batch"}' })),
        400,
        'file',
      );
    });

    it('keeps nothing of an upload whose client disconnects midway', async () => {
      const before = await storedState(service);
      const answer = await rawPost(
        `${service.url}/v1/files`,
        multipartHeaders(),
        [fieldPart('purpose', 'user_data'), fileHeader('gone.bin'), ...jsonlBytes(3 * MIB), closing()],
        { abortAfterBytes: 1 * MIB },
      );
      expect(answer.status).toBe(0);
      const deadline = Date.now() + 5000;
      while (JSON.stringify(await storedState(service)) !== JSON.stringify(before) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(await storedState(service)).toEqual(before);
      expect((await fetch(`${service.url}/live`)).status).toBe(200);
    });

    it('refuses invalid expires_after values, naming the field', async () => {
      const cases: Array<[Record<string, string>, string]> = [
        [{ 'expires_after[anchor]': 'last_active_at', 'expires_after[seconds]': '3600' }, 'expires_after.anchor'],
        [{ 'expires_after[anchor]': 'created_at', 'expires_after[seconds]': '3599' }, 'expires_after.seconds'],
        [{ 'expires_after[anchor]': 'created_at', 'expires_after[seconds]': '2592001' }, 'expires_after.seconds'],
        [{ 'expires_after[anchor]': 'created_at', 'expires_after[seconds]': 'soon' }, 'expires_after.seconds'],
        [{ 'expires_after[anchor]': 'created_at' }, 'expires_after.seconds'],
        [{ expires_after: '{not json' }, 'expires_after'],
        [{ expires_after: '{"anchor":"created_at","seconds":3600,"extra":1}' }, 'expires_after'],
      ];
      for (const [fields, param] of cases) {
        await expectRefusedCleanly(async () => asText(await uploadFile(service.url, { purpose: 'batch', content: 'x', fields })), 400, param);
      }
    });

    it('stores a filename with path separators as a label, never as a path', async () => {
      const before = readdirSync(service.dataDir).sort();
      for (const [given, expected] of [
        ['../../etc/passwd', 'passwd'],
        ['..\\..\\windows\\win.ini', 'win.ini'],
        ['..', 'file'],
      ]) {
        const answer = await rawPost(`${service.url}/v1/files`, multipartHeaders(), [fieldPart('purpose', 'user_data'), fileHeader(given!), Buffer.from('x'), closing()]);
        expect(answer.status).toBe(200);
        const file = JSON.parse(answer.body) as { id: string; filename: string };
        expect(file.filename).toBe(expected);
        const download = await fetch(`${service.url}/v1/files/${file.id}/content`);
        expect(download.headers.get('content-disposition')).toBe(`attachment; filename="${expected}"; filename*=UTF-8''${encodeURIComponent(expected!)}`);
        expect(await download.text()).toBe('x');
      }
      expect(readdirSync(service.dataDir).sort()).toEqual(before);
    });
  });
});

describe('the default 200 MiB limit for batch input files', () => {
  let service: Service;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service.close();
  });

  it('refuses one byte over 200 MiB, naming the limit, and stores nothing', async () => {
    const eventsBefore = (await service.eventStore.readAll({ maxCount: 1000 })).length;
    const answer = await rawPost(`${service.url}/v1/files`, multipartHeaders(), [fieldPart('purpose', 'batch'), fileHeader('huge.jsonl'), ...jsonlBytes(200 * MIB + 1), closing()]);
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body).error.message).toBe('File is too large: the input file size limit for purpose batch is 209715200 bytes');
    expect(await listKeys(service.blobStore, '')).toEqual([]);
    expect((await service.eventStore.readAll({ maxCount: 1000 })).length).toBe(eventsBefore);
  });
});
