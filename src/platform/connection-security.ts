// TLS and SASL for the managed services Spool connects to (Kafka, PostgreSQL), read from the
// environment. Certificates, keys and passwords are read from files, so they can come from mounted
// secrets; every problem names the variable (or connection-string parameter) that caused it.
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import type { ConnectionOptions } from 'node:tls';

/** PEM contents (not paths): a CA bundle to trust, and a client certificate with its key. */
export interface TlsMaterial {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
}

export type KafkaSaslMechanism = 'plain' | 'scram-sha-256' | 'scram-sha-512';
export const KAFKA_SASL_MECHANISMS: readonly KafkaSaslMechanism[] = ['plain', 'scram-sha-256', 'scram-sha-512'];

export interface KafkaSecurity {
  /** TLS to the brokers; undefined: plaintext. The brokers' certificates are always verified. */
  readonly tls?: TlsMaterial;
  readonly sasl?: { readonly mechanism: KafkaSaslMechanism; readonly username: string; readonly password: string };
}

/**
 * PostgreSQL's TLS, as libpq's `sslmode` names it: `require` encrypts without checking the server's
 * certificate, `verify-ca` checks it against the CA, `verify-full` also checks the host name.
 */
export interface PostgresTls extends TlsMaterial {
  readonly mode: 'require' | 'verify-ca' | 'verify-full';
}

type Lookup = (name: string) => string | undefined;

/** TLS material of the parts given (a part left out is absent, not undefined). */
function tlsMaterial(ca: string | undefined, cert: string | undefined, key: string | undefined): TlsMaterial {
  return { ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}) };
}

/** A file's contents, or a problem naming the variable that pointed at it. */
function readNamedFile(variable: string, path: string, cwd: string, problems: string[]): string | undefined {
  try {
    return readFileSync(isAbsolute(path) ? path : resolve(cwd, path), 'utf8');
  } catch (error) {
    problems.push(`${variable}: cannot read ${JSON.stringify(path)} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    return undefined;
  }
}

/** A secret from NAME_FILE (its contents, a trailing newline dropped) or else NAME itself. */
export function secretFromEnvironment(value: Lookup, name: string, cwd: string, problems: string[]): string | undefined {
  const file = value(`${name}_FILE`);
  if (file !== undefined) return readNamedFile(`${name}_FILE`, file, cwd, problems)?.replace(/\r?\n$/, '');
  return value(name);
}

function pemFile(variable: string, path: string | undefined, cwd: string, problems: string[], kind: 'CERTIFICATE' | 'PRIVATE KEY'): string | undefined {
  if (path === undefined) return undefined;
  const contents = readNamedFile(variable, path, cwd, problems);
  if (contents === undefined) return undefined;
  const looksRight = kind === 'CERTIFICATE' ? contents.includes('-----BEGIN CERTIFICATE-----') : /-----BEGIN (RSA |EC |ENCRYPTED )?PRIVATE KEY-----/.test(contents);
  if (!looksRight) {
    problems.push(`${variable}: ${JSON.stringify(path)} holds no PEM ${kind === 'CERTIFICATE' ? 'certificate' : 'private key'}`);
    return undefined;
  }
  return contents;
}

/**
 * KAFKA_SSL (true/false; on by default once a KAFKA_SSL_* file or a SASL mechanism is given),
 * KAFKA_SSL_CA_FILE (default: the CAs Node trusts), KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE
 * (a client certificate, both or neither), KAFKA_SASL_MECHANISM (plain, scram-sha-256,
 * scram-sha-512), KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD_FILE or KAFKA_SASL_PASSWORD.
 */
export function kafkaSecurityFromEnvironment(value: Lookup, cwd: string, problems: string[]): KafkaSecurity {
  const caPath = value('KAFKA_SSL_CA_FILE');
  const certPath = value('KAFKA_SSL_CERT_FILE');
  const keyPath = value('KAFKA_SSL_KEY_FILE');
  const mechanismRaw = value('KAFKA_SASL_MECHANISM')?.toLowerCase();
  const sslRaw = value('KAFKA_SSL')?.toLowerCase();
  if (sslRaw !== undefined && sslRaw !== 'true' && sslRaw !== 'false') problems.push(`KAFKA_SSL must be true or false, got ${JSON.stringify(sslRaw)}`);
  const tlsWanted = sslRaw === undefined ? caPath !== undefined || certPath !== undefined || keyPath !== undefined || mechanismRaw !== undefined : sslRaw === 'true';
  if (sslRaw === 'false' && (caPath ?? certPath ?? keyPath) !== undefined) problems.push('KAFKA_SSL=false, yet KAFKA_SSL_CA_FILE, KAFKA_SSL_CERT_FILE or KAFKA_SSL_KEY_FILE is set');
  if ((certPath === undefined) !== (keyPath === undefined)) problems.push('KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE go together: a client certificate needs its key');

  let tls: TlsMaterial | undefined;
  if (tlsWanted) {
    tls = tlsMaterial(
      pemFile('KAFKA_SSL_CA_FILE', caPath, cwd, problems, 'CERTIFICATE'),
      pemFile('KAFKA_SSL_CERT_FILE', certPath, cwd, problems, 'CERTIFICATE'),
      pemFile('KAFKA_SSL_KEY_FILE', keyPath, cwd, problems, 'PRIVATE KEY'),
    );
  }

  let sasl: KafkaSecurity['sasl'];
  if (mechanismRaw !== undefined) {
    const mechanism = KAFKA_SASL_MECHANISMS.find((known) => known === mechanismRaw);
    const username = value('KAFKA_SASL_USERNAME');
    const password = secretFromEnvironment(value, 'KAFKA_SASL_PASSWORD', cwd, problems);
    if (!mechanism) problems.push(`KAFKA_SASL_MECHANISM must be one of ${KAFKA_SASL_MECHANISMS.join(', ')}, got ${JSON.stringify(mechanismRaw)}`);
    if (username === undefined) problems.push('KAFKA_SASL_MECHANISM needs KAFKA_SASL_USERNAME');
    if (password === undefined && value('KAFKA_SASL_PASSWORD_FILE') === undefined) problems.push('KAFKA_SASL_MECHANISM needs KAFKA_SASL_PASSWORD_FILE (or KAFKA_SASL_PASSWORD)');
    if (mechanism && username !== undefined && password !== undefined) sasl = { mechanism, username, password };
  } else if (value('KAFKA_SASL_USERNAME') !== undefined || value('KAFKA_SASL_PASSWORD') !== undefined || value('KAFKA_SASL_PASSWORD_FILE') !== undefined) {
    problems.push('KAFKA_SASL_USERNAME or KAFKA_SASL_PASSWORD is set without KAFKA_SASL_MECHANISM (plain, scram-sha-256 or scram-sha-512)');
  }
  return { ...(tls ? { tls } : {}), ...(sasl ? { sasl } : {}) };
}

const POSTGRES_TLS_PARAMETERS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'ssl', 'uselibpqcompat'] as const;

/**
 * PostgreSQL's TLS from the connection string's `sslmode`, `sslrootcert`, `sslcert` and `sslkey`,
 * or else libpq's variables PGSSLMODE, PGSSLROOTCERT, PGSSLCERT and PGSSLKEY. Returns the
 * connection string without those parameters (Spool sets the client's TLS itself, so libpq's
 * meanings hold: node-postgres reads `sslmode=require` as verify-full) and the TLS to use.
 * `disable` or none: no TLS. `prefer` and `allow` (try TLS, fall back to none) are refused: a
 * connection either is encrypted or is not.
 */
export function postgresTlsFromUrl(connectionString: string, value: Lookup, cwd: string, problems: string[]): { connectionString: string; tls: PostgresTls | undefined } {
  const url = new URL(connectionString);
  const param = (name: string) => {
    const raw = url.searchParams.get(name);
    return raw === null || raw.trim() === '' ? undefined : raw.trim();
  };
  const from = (parameter: string, variable: string) => (param(parameter) !== undefined ? { where: `EVENTSTORE_URL's ${parameter}`, path: param(parameter) } : { where: variable, path: value(variable) });
  const modeFrom = from('sslmode', 'PGSSLMODE');
  const mode = modeFrom.path?.toLowerCase();
  const root = from('sslrootcert', 'PGSSLROOTCERT');
  const cert = from('sslcert', 'PGSSLCERT');
  const key = from('sslkey', 'PGSSLKEY');
  for (const name of POSTGRES_TLS_PARAMETERS) url.searchParams.delete(name);
  const stripped = url.toString();

  if (mode === undefined || mode === 'disable') {
    if (root.path ?? cert.path ?? key.path) problems.push(`${root.path ? root.where : cert.path ? cert.where : key.where} is set but sslmode is ${mode ?? 'not set'}: set sslmode (EVENTSTORE_URL or PGSSLMODE) to require, verify-ca or verify-full`);
    return { connectionString: stripped, tls: undefined };
  }
  if (mode !== 'require' && mode !== 'verify-ca' && mode !== 'verify-full') {
    problems.push(`${modeFrom.where} must be disable, require, verify-ca or verify-full, got ${JSON.stringify(mode)} (prefer and allow fall back to an unencrypted connection, which Spool does not do)`);
    return { connectionString: stripped, tls: undefined };
  }
  if ((cert.path === undefined) !== (key.path === undefined)) problems.push(`${cert.path ? key.where : cert.where} is missing: a client certificate needs its key (sslcert and sslkey go together)`);
  const material = tlsMaterial(pemFile(root.where, root.path, cwd, problems, 'CERTIFICATE'), pemFile(cert.where, cert.path, cwd, problems, 'CERTIFICATE'), pemFile(key.where, key.path, cwd, problems, 'PRIVATE KEY'));
  return { connectionString: stripped, tls: { mode, ...material } };
}

/** node-postgres's `ssl` option for a PostgresTls (false: no TLS). */
export function postgresSslOption(tls: PostgresTls | false): false | ConnectionOptions {
  if (!tls) return false;
  const { mode, ...material } = tls;
  if (mode === 'require') return { ...material, rejectUnauthorized: false };
  if (mode === 'verify-ca') return { ...material, rejectUnauthorized: true, checkServerIdentity: () => undefined };
  return { ...material, rejectUnauthorized: true };
}

/** How a Kafka connection is secured, for the message log's description: ` (TLS, SASL plain)` or nothing. */
export function describeKafkaSecurity(security: KafkaSecurity | undefined): string {
  const parts = [security?.tls && 'TLS', security?.sasl && `SASL ${security.sasl.mechanism}`, security?.sasl && !security.tls && 'no TLS'].filter(Boolean);
  return parts.length > 0 ? ` (${parts.join(', ')})` : '';
}
