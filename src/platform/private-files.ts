import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';

// What Spool keeps on disk (the event log, read models, file contents, checkpoints) is readable by
// the account that runs it and no one else, whatever the process umask.

export const PRIVATE_DIRECTORY_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/**
 * Creates the directory and any missing parents, owner-only. A directory that already exists is
 * left as it is: its mode is the operator's choice.
 */
export function makePrivateDirectory(path: string): void {
  mkdirSync(path, { recursive: true, mode: PRIVATE_DIRECTORY_MODE });
}

export async function makePrivateDirectoryAsync(path: string): Promise<void> {
  await mkdir(path, { recursive: true, mode: PRIVATE_DIRECTORY_MODE });
}

/**
 * Call before SQLite opens path. SQLite creates its -wal, -shm and -journal files with the mode of
 * the database file, so an owner-only database file keeps them owner-only too. Files written with
 * a wider mode by an earlier version are narrowed.
 */
export function preparePrivateDatabaseFile(path: string): void {
  closeSync(openSync(path, 'a', PRIVATE_FILE_MODE));
  for (const file of [path, `${path}-wal`, `${path}-shm`, `${path}-journal`]) narrowToOwner(file);
}

function narrowToOwner(path: string): void {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  if ((mode & 0o077) !== 0) chmodSync(path, mode & 0o700);
}
