import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { packageRoot } from '../../src/platform/package-root.js';

/** Runs `spool <args>` (the built CLI) to the end; resolves with its exit code and output. */
export function runSpool(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(packageRoot, 'dist/src/process/cli.js'), ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
