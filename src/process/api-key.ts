import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The bearer token for /mgmt/v1 and /compat/v1: API_KEY if set; otherwise the key kept in
 * DATA_DIR/api-key, generated (and announced once) on the first start.
 */
export function resolveApiKey(configured: string | undefined, dataDir: string, announce: (line: string) => void): string {
  if (configured) return configured;
  const path = join(dataDir, 'api-key');
  const stored = readKey(path);
  if (stored) return stored;
  const key = `sk-spool-${randomBytes(24).toString('base64url')}`;
  try {
    writeFileSync(path, `${key}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    // Another process sharing DATA_DIR wrote one first: use theirs.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return readKey(path) ?? key;
    throw error;
  }
  announce(`spool: generated an API key for /mgmt/v1 and /compat/v1 (kept in ${path}):\n  ${key}`);
  return key;
}

function readKey(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim() || undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
