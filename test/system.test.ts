import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { httpSchema } from '../src/platform/schemas.js';
import { packageRoot } from '../src/platform/package-root.js';
import type { RunningService } from '../src/service.js';
import { TEST_API_KEY, s3Env, startTestService, tempDir, uploadFile } from './support/service.js';
import { runSpool } from './support/spool-cli.js';

describe('service description and access', () => {
  let service: RunningService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service.close();
  });

  it('serves an OpenAPI 3 document, version 0.1.0, built from the schemas that validate the routes', async () => {
    const document = (await (await fetch(`${service.url}/openapi.json`)).json()) as any;
    expect(document.openapi).toMatch(/^3\./);
    expect(document.info.version).toBe('0.1.0');
    const routes = service.app.printRoutes({ commonPrefix: false });
    for (const [path, method] of [
      ['/v1/files', 'post'],
      ['/v1/files', 'get'],
      ['/v1/files/{file_id}', 'get'],
      ['/v1/files/{file_id}', 'delete'],
      ['/v1/files/{file_id}/content', 'get'],
      ['/ready', 'get'],
      ['/live', 'get'],
      ['/openapi.json', 'get'],
    ] as const) {
      expect(document.paths[path]?.[method], `${method} ${path}`).toBeDefined();
      expect(routes).toContain(path.replace(/\{(\w+)\}/g, ':$1').split('/').pop());
    }
    const list = document.paths['/v1/files'].get;
    expect(list.parameters.find((parameter: { name: string }) => parameter.name === 'limit').schema).toEqual((httpSchema('ListFilesQuery').properties as Record<string, unknown>).limit);
    expect(list.responses['200'].content['application/json'].schema).toEqual(httpSchema('FileList'));
    expect(list.responses['422'].content['application/json'].schema).toEqual(httpSchema('ValidationError'));
    expect(document.paths['/v1/files'].post.requestBody.content['multipart/form-data'].schema).toEqual(httpSchema('UploadFileForm'));
    expect(document.paths['/v1/files/{file_id}'].get.responses.default.content['application/json'].schema).toEqual(httpSchema('ErrorEnvelope'));
  });

  it('asks for the bearer API key on /mgmt/v1 and /compat/v1, and not on /v1', async () => {
    const missing = await fetch(`${service.url}/mgmt/v1/weights/status`);
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as any).error).toMatchObject({ code: 'invalid_api_key', type: 'invalid_request_error' });
    const wrong = await fetch(`${service.url}/compat/v1/models`, { headers: { authorization: 'Bearer not-the-key' } });
    expect(wrong.status).toBe(401);
    const right = await fetch(`${service.url}/compat/v1/nothing`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    expect(right.status).toBe(404);
    expect((await fetch(`${service.url}/v1/files`)).status).toBe(200);
  });
});

describe('configuration', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({}, '/srv');
    expect(config).toMatchObject({ port: 8080, host: '127.0.0.1', dataDir: '/srv/data', apiKey: undefined, eventStoreUrl: undefined, blobStore: undefined });
  });

  it('reads every setting and reports every bad value by name at once', () => {
    const config = loadConfig({ PORT: '9000', HOST: '0.0.0.0', DATA_DIR: '/var/spool', EVENTSTORE_URL: 'esdb://db:2113?tls=false', BLOB_STORE: 's3://bucket/some/prefix/', S3_FORCE_PATH_STYLE: 'true' });
    expect(config).toMatchObject({ port: 9000, host: '0.0.0.0', dataDir: '/var/spool', eventStoreUrl: 'esdb://db:2113?tls=false', blobStore: { bucket: 'bucket', prefix: 'some/prefix' } });
    expect(config.s3.forcePathStyle).toBe(true);
    let error: unknown;
    try {
      loadConfig({ PORT: '80a', BLOB_STORE: 'bucket', EVENTSTORE_URL: 'mysql://x', S3_FORCE_PATH_STYLE: 'yes', API_KEY: 'short' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    for (const name of ['PORT', 'BLOB_STORE', 'EVENTSTORE_URL', 'S3_FORCE_PATH_STYLE', 'API_KEY']) expect(problems).toContain(name);
  });

  it('takes a postgres:// or postgresql:// EVENTSTORE_URL as the PostgreSQL event store, and refuses one without a host', () => {
    // TLS is taken out of the URL and set by Spool itself, with libpq's meaning of each sslmode.
    const withTls = loadConfig({ EVENTSTORE_URL: 'postgres://spool:secret@db:5432/spool?sslmode=require&application_name=spool' });
    expect(withTls.eventStoreUrl).toBe('postgres://spool:secret@db:5432/spool?application_name=spool');
    expect(withTls.eventStoreTls).toEqual({ mode: 'require' });
    expect(loadConfig({ EVENTSTORE_URL: 'postgresql://db/spool' }).eventStoreUrl).toBe('postgresql://db/spool');
    expect(() => loadConfig({ EVENTSTORE_URL: 'postgres:///spool' })).toThrow(/EVENTSTORE_URL=postgres:\/\/… needs a host/);
  });

  it('reads MODELS_THREADS (unset: the embedding model picks from the cores), and refuses one out of range by name', () => {
    expect(loadConfig({}).models.threads).toBeUndefined();
    expect(loadConfig({ MODELS_THREADS: '3' }).models.threads).toBe(3);
    for (const bad of ['0', 'two', '65']) expect(() => loadConfig({ MODELS_THREADS: bad })).toThrow(/MODELS_THREADS must be an integer from 1 to 64/);
  });

  it('reads the image settings, and refuses an IMAGE_BUCKETS that names the blob store’s bucket', () => {
    expect(loadConfig({}).images).toEqual({ buckets: undefined, maxBytes: 20 * 1024 * 1024, fetchConcurrency: 4 });
    expect(loadConfig({ IMAGE_BUCKETS: 'photos, scans.example', IMAGE_MAX_BYTES: '1048576', IMAGE_FETCH_CONCURRENCY: '2' }).images).toEqual({
      buckets: ['photos', 'scans.example'],
      maxBytes: 1048576,
      fetchConcurrency: 2,
    });
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(env);
        return '';
      } catch (error) {
        return (error as ConfigError).problems.join('\n');
      }
    };
    expect(problems({ BLOB_STORE: 's3://spool-files/prefix', IMAGE_BUCKETS: 'photos,spool-files' })).toContain('IMAGE_BUCKETS must not name "spool-files", the bucket of BLOB_STORE');
    expect(problems({ IMAGE_BUCKETS: 'Photos_Bucket' })).toContain('IMAGE_BUCKETS must be a comma-separated list of S3 bucket names');
    expect(problems({ IMAGE_MAX_BYTES: '0', IMAGE_FETCH_CONCURRENCY: 'many' })).toMatch(/IMAGE_MAX_BYTES must be an integer[^]*IMAGE_FETCH_CONCURRENCY must be an integer/);
  });
});

/** Runs the built CLI as a user would (npm start runs the same file). */
function runCli(env: Record<string, string>, until: RegExp, timeoutMs = 20_000): Promise<{ stdout: string; stderr: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(packageRoot, 'dist/src/process/cli.js'), 'serve'], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`cli did not print ${until} in time:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    // One SIGTERM, as a user's one Ctrl-C or an orchestrator's stop: a second one during the
    // shutdown forces the exit (143), and output keeps coming after the line waited for.
    let signalled = false;
    const check = () => {
      if (signalled || !until.test(stdout + stderr)) return;
      signalled = true;
      child.kill('SIGTERM');
    };
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      check();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      check();
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code });
    });
  });
}

describe('the spool command', () => {
  it('refuses a bad configuration with a clear message and exit code 78', async () => {
    const result = await runCli({ PORT: 'eighty', DATA_DIR: tempDir('cli') }, /$^/);
    expect(result.code).toBe(78);
    expect(result.stderr).toContain('invalid configuration');
    expect(result.stderr).toContain('PORT must be an integer from 0 to 65535, got "eighty"');
  });

  it('refuses to run a processor or the relay on its own without Kafka, and an unknown processor kind', async () => {
    const env = { PORT: '0', DATA_DIR: tempDir('cli'), KAFKA_BROKERS: '' };
    for (const args of [['processor', 'inference'], ['relay']]) {
      const alone = await runSpool(args, env);
      expect(alone.code, args.join(' ')).toBe(78);
      expect(alone.stderr).toContain('KAFKA_BROKERS must be set');
    }
    const unknown = await runSpool(['processor', 'trainer'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('processor needs a kind: validator, inference, finalizer, checkpoint');
    const badBrokers = await runSpool(['processor', 'inference'], { ...env, KAFKA_BROKERS: 'not a broker' });
    expect(badBrokers.code).toBe(78);
    expect(badBrokers.stderr).toContain('KAFKA_BROKERS must be a comma-separated list of host:port');
  });

  it('generates an API key on first start, prints it once, keeps it, and stops cleanly on SIGTERM', async () => {
    const dataDir = tempDir('cli');
    const first = await runCli({ PORT: '0', DATA_DIR: dataDir }, /spool is serving/);
    expect(first.code).toBe(0);
    const key = readFileSync(join(dataDir, 'api-key'), 'utf8').trim();
    expect(key).toMatch(/^sk-spool-/);
    expect(first.stderr).toContain(key);
    const second = await runCli({ PORT: '0', DATA_DIR: dataDir }, /spool is serving/);
    expect(second.stderr + second.stdout).not.toContain(key);
    expect(readFileSync(join(dataDir, 'api-key'), 'utf8').trim()).toBe(key);
    for (const line of second.stdout.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
    expect(existsSync(join(dataDir, 'events.sqlite'))).toBe(true);
  });
});

describe('the service on S3 for blobs', () => {
  it('stores and serves file content from the S3-compatible server', async () => {
    const service = await startTestService({ env: s3Env(`service-${Date.now()}`) });
    const file = (await (await uploadFile(service.url, { purpose: 'batch', content: 'on s3\n' })).json()) as { id: string };
    expect(service.blobStore.description).toMatch(/^s3:\/\//);
    expect(await service.blobStore.head(`files/${file.id}`)).toMatchObject({ size: 6 });
    expect(await (await fetch(`${service.url}/v1/files/${file.id}/content`)).text()).toBe('on s3\n');
    await fetch(`${service.url}/v1/files/${file.id}`, { method: 'DELETE' });
    expect(await service.blobStore.head(`files/${file.id}`)).toBeUndefined();
    await service.close();
  });
});
