import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Files of a test certificate authority and what it signed, made with the openssl command. */
export interface TestCertificates {
  readonly dir: string;
  /** The CA's certificate (PEM): what clients trust. */
  readonly caFile: string;
  /** The server's certificate (PEM, for localhost and 127.0.0.1) and its unencrypted PKCS#8 key. */
  readonly serverCertFile: string;
  readonly serverKeyFile: string;
  /** The server's key and certificate chain as a PKCS#12 keystore (for a JVM), with its password. */
  readonly serverKeystoreFile: string;
  readonly keystorePassword: string;
  /** A client certificate (PEM) signed by the CA, and its key. */
  readonly clientCertFile: string;
  readonly clientKeyFile: string;
  /** Another CA's certificate, which signed none of the above: trusting it alone must fail. */
  readonly otherCaFile: string;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

function authority(dir: string, name: string, subject: string): void {
  openssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`, '-days', '2', '-subj', subject, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
}

function signed(dir: string, name: string, subject: string, extensions: string): void {
  openssl(dir, ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject]);
  writeFileSync(join(dir, `${name}.ext`), extensions);
  openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`]);
}

/** A CA, a server certificate for `hosts` (names and addresses), a client certificate, and an unrelated CA. */
export function makeTestCertificates(hosts: readonly string[] = ['localhost', '127.0.0.1']): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'spool-certs-'));
  chmodSync(dir, 0o755);
  authority(dir, 'ca', '/CN=Spool test CA');
  authority(dir, 'other-ca', '/CN=Some other CA');
  const alternativeNames = hosts.map((host) => (/^[\d.]+$/.test(host) ? `IP:${host}` : `DNS:${host}`)).join(',');
  signed(dir, 'server', `/CN=${hosts[0]}`, `subjectAltName=${alternativeNames}\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n`);
  signed(dir, 'client', '/CN=spool', 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n');
  const keystorePassword = 'spool-keystore';
  openssl(dir, ['pkcs12', '-export', '-in', 'server.pem', '-inkey', 'server.key', '-certfile', 'ca.pem', '-name', 'server', '-out', 'server.p12', '-passout', `pass:${keystorePassword}`]);
  for (const file of ['server.key', 'client.key', 'ca.key', 'other-ca.key']) chmodSync(join(dir, file), 0o600);
  for (const file of ['ca.pem', 'other-ca.pem', 'server.pem', 'client.pem', 'server.p12']) chmodSync(join(dir, file), 0o644);
  return {
    dir,
    caFile: join(dir, 'ca.pem'),
    serverCertFile: join(dir, 'server.pem'),
    serverKeyFile: join(dir, 'server.key'),
    serverKeystoreFile: join(dir, 'server.p12'),
    keystorePassword,
    clientCertFile: join(dir, 'client.pem'),
    clientKeyFile: join(dir, 'client.key'),
    otherCaFile: join(dir, 'other-ca.pem'),
  };
}
