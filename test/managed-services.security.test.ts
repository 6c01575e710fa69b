import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { PostgresEventStore } from '../src/event-store/postgres-event-store.js';
import type { DeliveredMessage, MessageLog } from '../src/message-log/message-log.js';
import { openEventStore, openMessageLog } from '../src/wiring/adapters.js';
import { chatLine, createBatch, fileLines, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { type TestCertificates, makeTestCertificates } from './support/certificates.js';
import { FakeEngine } from './support/fake-engine.js';
import { type KafkaBroker, startKafkaBroker } from './support/kafka-broker.js';
import { type PostgresServer, startPostgres } from './support/postgres-server.js';
import { startSpoolCli, stop, waitForReady } from './support/processes.js';
import { TEST_API_KEY, tempDir } from './support/service.js';

// Managed Kafka and PostgreSQL are reached over TLS, Kafka with SASL: a real broker with a SASL_SSL
// listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and an SSL listener that requires client
// certificates, and a real PostgreSQL that takes TLS connections only, both on certificates this
// test makes with openssl. Everything is configured as an operator would: by environment, with
// passwords, keys and certificates in files (as mounted secrets are).

const USER = 'spool';
const PASSWORD = 'spool-secret-0123';
const silent = pino({ level: 'silent' });

let certificates: TestCertificates;
let broker: KafkaBroker;
let postgres: PostgresServer;
let passwordFile: string;

beforeAll(async () => {
  certificates = makeTestCertificates();
  passwordFile = join(certificates.dir, 'kafka-password');
  writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
  [broker, postgres] = await Promise.all([startKafkaBroker({ secure: { certificates, users: { [USER]: PASSWORD } } }), startPostgres(undefined, { tls: certificates })]);
}, 180_000);
afterAll(async () => {
  await Promise.all([broker?.stop(), postgres?.stop()]);
});

const configFrom = (env: Record<string, string>) => loadConfig({ DATA_DIR: tempDir('security'), ...env });

/** A message there and back through the log: a topic made, a message published, the same consumed. */
async function roundTrip(log: MessageLog, topic: string): Promise<DeliveredMessage> {
  await log.ensureTopics([{ topic, partitions: 1 }]);
  await log.publish(topic, [{ key: 'k', value: `hello over ${topic}` }]);
  let resolve!: (message: DeliveredMessage) => void;
  const received = new Promise<DeliveredMessage>((done) => (resolve = done));
  const consumer = await log.consume({ groupId: `${topic}-group`, topics: [topic] }, async (message) => resolve(message));
  try {
    return await received;
  } finally {
    await consumer.stop();
  }
}

/** The first error opening and using the log gives, within the time limit. */
async function failureOf(env: Record<string, string>): Promise<string> {
  const log = await openMessageLog(configFrom(env), silent);
  try {
    await log.ensureTopics([{ topic: 'never', partitions: 1 }]);
    return 'no error';
  } catch (error) {
    return String((error as Error).message);
  } finally {
    await log.close().catch(() => undefined);
  }
}

describe('Kafka over TLS and SASL', () => {
  const saslEnv = (mechanism: string) => ({
    KAFKA_BROKERS: broker.saslSslBrokers!,
    KAFKA_SASL_MECHANISM: mechanism,
    KAFKA_SASL_USERNAME: USER,
    KAFKA_SASL_PASSWORD_FILE: passwordFile,
    KAFKA_SSL_CA_FILE: certificates.caFile,
  });

  it.each(['plain', 'scram-sha-256', 'scram-sha-512'])('carries messages over SASL_SSL with %s, the password from a file', async (mechanism) => {
    const log = await openMessageLog(configFrom(saslEnv(mechanism)), silent);
    try {
      expect(log.description).toBe(`kafka ${broker.saslSslBrokers} (TLS, SASL ${mechanism})`);
      const message = await roundTrip(log, `secure-${mechanism}`);
      expect(message.value).toBe(`hello over secure-${mechanism}`);
    } finally {
      await log.close();
    }
  }, 60_000);

  it('is refused with a wrong password, and by a broker whose certificate its CA did not sign', async () => {
    const wrongPassword = join(certificates.dir, 'wrong-password');
    writeFileSync(wrongPassword, 'not-the-password');
    expect(await failureOf({ ...saslEnv('scram-sha-512'), KAFKA_SASL_PASSWORD_FILE: wrongPassword })).toMatch(/SASL SCRAM SHA512 authentication failed|Authentication failed/i);
    expect(await failureOf({ ...saslEnv('plain'), KAFKA_SSL_CA_FILE: certificates.otherCaFile })).toMatch(/certificate/i);
  }, 90_000);

  it('carries messages with a client certificate where the broker requires one, and is refused without it', async () => {
    const env = { KAFKA_BROKERS: broker.mutualTlsBrokers!, KAFKA_SSL_CA_FILE: certificates.caFile, KAFKA_SSL_CERT_FILE: certificates.clientCertFile, KAFKA_SSL_KEY_FILE: certificates.clientKeyFile };
    const log = await openMessageLog(configFrom(env), silent);
    try {
      expect((await roundTrip(log, 'secure-mtls')).value).toBe('hello over secure-mtls');
    } finally {
      await log.close();
    }
    expect(await failureOf({ KAFKA_BROKERS: broker.mutualTlsBrokers!, KAFKA_SSL_CA_FILE: certificates.caFile })).not.toBe('no error');
  }, 90_000);

  it('names the variable at fault when the settings do not hold together', () => {
    const problems = (env: Record<string, string>) => {
      try {
        configFrom({ KAFKA_BROKERS: '127.0.0.1:9093', ...env });
        return [];
      } catch (error) {
        return (error as ConfigError).problems;
      }
    };
    expect(problems({ KAFKA_SASL_MECHANISM: 'gssapi', KAFKA_SASL_USERNAME: USER, KAFKA_SASL_PASSWORD: PASSWORD })).toEqual([expect.stringContaining('KAFKA_SASL_MECHANISM must be one of plain, scram-sha-256, scram-sha-512')]);
    expect(problems({ KAFKA_SASL_MECHANISM: 'plain' })).toEqual([expect.stringContaining('needs KAFKA_SASL_USERNAME'), expect.stringContaining('needs KAFKA_SASL_PASSWORD_FILE')]);
    expect(problems({ KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: USER, KAFKA_SASL_PASSWORD_FILE: join(certificates.dir, 'missing') })).toEqual([expect.stringMatching(/^KAFKA_SASL_PASSWORD_FILE: cannot read .*missing.* \(ENOENT\)$/)]);
    expect(problems({ KAFKA_SSL_CERT_FILE: certificates.clientCertFile })).toEqual([expect.stringContaining('KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE go together')]);
    expect(problems({ KAFKA_SSL_CA_FILE: certificates.clientKeyFile })).toEqual([expect.stringContaining('KAFKA_SSL_CA_FILE: ') && expect.stringContaining('holds no PEM certificate')]);
    expect(problems({ KAFKA_SASL_USERNAME: USER })).toEqual([expect.stringContaining('without KAFKA_SASL_MECHANISM')]);
    expect(problems({ KAFKA_SSL: 'false', KAFKA_SSL_CA_FILE: certificates.caFile })).toEqual([expect.stringContaining('KAFKA_SSL=false, yet')]);
  });
});

describe('PostgreSQL over TLS', () => {
  const url = (params: string) => `${postgres.url}${params}`;
  /** Opens the event store as the service does and reads its log: true once that worked. */
  const reachable = async (env: Record<string, string>) => {
    const store = await openEventStore(configFrom(env));
    try {
      await store.headPosition();
      return Array.isArray(await store.readAll({ maxCount: 10 }));
    } finally {
      await store.close();
    }
  };

  it('reads its log with sslmode=verify-full against the CA, from the URL or from PGSSLMODE and PGSSLROOTCERT', async () => {
    expect(await reachable({ EVENTSTORE_URL: url(`?sslmode=verify-full&sslrootcert=${encodeURIComponent(certificates.caFile)}`) })).toBe(true);
    expect(await reachable({ EVENTSTORE_URL: postgres.url, PGSSLMODE: 'verify-full', PGSSLROOTCERT: certificates.caFile })).toBe(true);
    // The connections really are encrypted: the server says so of each of its clients.
    const client = new pg.Client({ connectionString: postgres.url, ssl: { ca: (await import('node:fs')).readFileSync(certificates.caFile, 'utf8') } });
    await client.connect();
    try {
      expect((await client.query<{ ssl: boolean }>('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()')).rows[0]!.ssl).toBe(true);
    } finally {
      await client.end();
    }
  }, 60_000);

  it('is refused by a server whose certificate its CA did not sign, and by the server without TLS', async () => {
    const untrusted = new PostgresEventStore(postgres.url, { tls: { mode: 'verify-full', ca: (await import('node:fs')).readFileSync(certificates.otherCaFile, 'utf8') } });
    await expect(untrusted.headPosition()).rejects.toThrow(/certificate/i);
    await untrusted.close();
    const plain = await openEventStore(configFrom({ EVENTSTORE_URL: url('?sslmode=disable') }));
    await expect(plain.headPosition()).rejects.toThrow(/no encryption|pg_hba/);
    await plain.close();
  }, 60_000);

  it('names the setting at fault', () => {
    const problems = (env: Record<string, string>) => {
      try {
        configFrom(env);
        return [];
      } catch (error) {
        return (error as ConfigError).problems;
      }
    };
    expect(problems({ EVENTSTORE_URL: url('?sslmode=prefer') })).toEqual([expect.stringContaining("EVENTSTORE_URL's sslmode must be disable, require, verify-ca or verify-full")]);
    expect(problems({ EVENTSTORE_URL: postgres.url, PGSSLMODE: 'verify-ca', PGSSLROOTCERT: join(certificates.dir, 'missing.pem') })).toEqual([expect.stringMatching(/^PGSSLROOTCERT: cannot read/)]);
    expect(problems({ EVENTSTORE_URL: url(`?sslrootcert=${encodeURIComponent(certificates.caFile)}`) })).toEqual([expect.stringContaining('but sslmode is not set')]);
  });
});

describe('the whole service on managed-style Kafka (SASL_SSL, SCRAM-SHA-512) and PostgreSQL (TLS, verify-full)', () => {
  const engine = new FakeEngine();
  let spool: ChildProcess | undefined;
  beforeAll(async () => {
    await engine.start();
  });
  afterAll(async () => {
    if (spool) await stop(spool);
    await engine.stop();
  });

  it('runs a batch with every line exactly once', async () => {
    const pgUrl = new URL(postgres.url);
    const pgPasswordFile = join(certificates.dir, 'pg-password');
    writeFileSync(pgPasswordFile, decodeURIComponent(pgUrl.password), { mode: 0o600 });
    pgUrl.password = '';
    const started = await startSpoolCli(['serve', '--all'], {
      PORT: '0',
      DATA_DIR: tempDir('security-service'),
      API_KEY: TEST_API_KEY,
      LOG_LEVEL: 'info',
      EVENTSTORE_URL: `${pgUrl.toString()}?sslmode=verify-full`,
      PGSSLROOTCERT: certificates.caFile,
      PGPASSWORD_FILE: pgPasswordFile,
      KAFKA_BROKERS: broker.saslSslBrokers!,
      KAFKA_SASL_MECHANISM: 'scram-sha-512',
      KAFKA_SASL_USERNAME: USER,
      KAFKA_SASL_PASSWORD_FILE: passwordFile,
      KAFKA_SSL_CA_FILE: certificates.caFile,
      KAFKA_PARTITIONS: '2',
      ENGINE_BASE_URL: engine.url,
      ENGINE_MODELS: 'tiny-chat',
      BATCH_CHUNK_LINES: '4',
    });
    spool = started.child;
    let log = "";
    spool.stdout?.on("data", (chunk: Buffer) => (log += chunk.toString()));
    spool.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString()));
    onTestFailed(() => console.log(`--- spool's log ---\n${log.slice(-6000)}`));
    await waitForReady(started.url, 90_000);
    const ready = (await (await fetch(`${started.url}/ready`)).json()) as Record<string, unknown>;
    expect(JSON.stringify(ready)).not.toContain(PASSWORD);
    expect((await reserveJob(started.url, { job_id: 'secure-job', model: 'tiny-chat', use_case: 'tests', sla: '1h', price_1m_tokens: 1 })).status).toBe(201);
    const client = new OpenAI({ baseURL: `${started.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const lines = Array.from({ length: 12 }, (_, line) => chatLine(`secure-${line}`, `hello ${line}`));
    const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'input.jsonl'), purpose: 'batch' });
    const batch = await createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: 'secure-job' });
    const done = await waitForStatus(client, batch.id, ['completed', 'failed', 'expired', 'cancelled'], 90_000);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toMatchObject({ total: 12, completed: 12, failed: 0 });
    const output = await fileLines(client, done.output_file_id);
    expect(output.map((line) => line.custom_id).sort()).toEqual(lines.map((_, line) => `secure-${line}`).sort());
    // The engine answered each line once (a line sent twice would show here).
    expect(engine.texts.filter((text) => text.startsWith('hello')).sort()).toEqual(lines.map((_, line) => `hello ${line}`).sort());
  }, 180_000);
});
