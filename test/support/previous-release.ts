// The previous release of Spool, built beside this checkout, for the rolling-upgrade test: its
// sources taken from git (`git archive`), its dependencies those of this checkout where its
// package-lock.json is the same (else installed with npm ci), built with its own tsc settings,
// cached in .cache/previous-release/<commit>.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../src/platform/package-root.js';

/**
 * The release a running deployment upgrades from: the last one that landed before the changes this
 * test is about. Move it forward as releases land (CHANGELOG.md's upgrade notes name what changed).
 */
export const PREVIOUS_RELEASE = '61354088dc12232bc1f243fcb644216947198aa0';

/** Why the previous release cannot be had here (a shallow clone, no git), or undefined when it can. */
export function previousReleaseUnavailable(): string | undefined {
  try {
    execFileSync('git', ['-C', packageRoot, 'cat-file', '-e', `${PREVIOUS_RELEASE}^{commit}`], { stdio: 'ignore' });
    return undefined;
  } catch {
    return `commit ${PREVIOUS_RELEASE.slice(0, 7)} is not in this clone's git history`;
  }
}

/** The previous release's built CLI (dist/src/process/cli.js), built on first use. */
export function previousReleaseCli(): string {
  const root = join(packageRoot, '.cache', 'previous-release', PREVIOUS_RELEASE);
  const cli = join(root, 'dist', 'src', 'process', 'cli.js');
  if (existsSync(join(root, '.complete'))) return cli;
  const staging = `${root}.${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  try {
    const archive = execFileSync('git', ['-C', packageRoot, 'archive', '--format=tar', PREVIOUS_RELEASE], { maxBuffer: 512 * 1024 * 1024 });
    execFileSync('tar', ['-x', '-C', staging], { input: archive });
    const sameDependencies = readFileSync(join(staging, 'package-lock.json'), 'utf8') === readFileSync(join(packageRoot, 'package-lock.json'), 'utf8');
    if (sameDependencies) symlinkSync(join(packageRoot, 'node_modules'), join(staging, 'node_modules'), 'dir');
    else execFileSync('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: staging, stdio: 'ignore' });
    execFileSync(process.execPath, [join(packageRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: staging, stdio: 'pipe' });
    writeFileSync(join(staging, '.complete'), `${new Date().toISOString()}\n`);
    if (!existsSync(join(root, '.complete'))) {
      rmSync(root, { recursive: true, force: true });
      renameSync(staging, root);
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return cli;
}
