import { isIP } from 'node:net';
import type { Config } from '../config.js';
import type { Role } from './roles.js';

/**
 * What to say when the API listens beyond this machine with accounts off: then `/v1` (every
 * file, batch and result) is open to anyone who reaches the address, as the spec's `/v1` is.
 * Undefined when that is not so: accounts are required, the process has no API, or HOST is a
 * loopback address (127.0.0.0/8, ::1, localhost).
 */
export function openApiExposure(config: Pick<Config, 'accounts' | 'host'>, roles: ReadonlySet<Role>): string | undefined {
  if (config.accounts === 'required' || !roles.has('api') || isLoopback(config.host)) return undefined;
  return `ACCOUNTS is off and HOST ${config.host} is not a loopback address: /v1 (every file, batch and result) answers anyone who reaches it; set ACCOUNTS=required to require an account's key`;
}

function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  if (bare === 'localhost') return true;
  if (isIP(bare) === 4) return bare.startsWith('127.');
  if (isIP(bare) === 6) return bare === '::1' || /^::ffff:127\./i.test(bare);
  return false;
}
