import { ExitCode } from './startup-failure.js';

/**
 * The Node.js versions Spool runs on, as npm reads them (package.json `engines`, enforced by
 * `engine-strict` in .npmrc): 22 from 22.15, the floor of the packages it depends on, and 24 or
 * later. 23 is left out: an odd-numbered line, never LTS, past its end of life, never tested. On
 * Node 20 the native SQLite module crashes the process (a segmentation fault, with no word).
 */
export const SUPPORTED_NODE = '^22.15.0 || >=24';

/** Whether `version` (`v24.1.0` or `24.1.0`) is one of SUPPORTED_NODE. */
export function isSupportedNode(version: string): boolean {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  return (major === 22 && minor >= 15) || major >= 24;
}

/** The one line that says this Node.js is not supported, and how to get one that is. */
export function unsupportedNodeMessage(version: string, platform: string = process.platform, arch: string = process.arch): string {
  // The official binaries are on the npm registry as node-<platform>-<arch> (README, quick start).
  const fetch =
    platform === 'linux' || platform === 'darwin'
      ? `npm install --prefix ~/node24 node-${platform}-${arch}@24 && export PATH=~/node24/node_modules/node-${platform}-${arch}/bin:$PATH`
      : 'see https://nodejs.org/en/download';
  return `spool: Node.js ${version} is not supported; Spool runs on Node.js 22 (22.15 or later) and 24. To get Node.js 24: ${fetch}`;
}

/**
 * Stops the process with that line and exit code 3 unless this Node.js is supported. The entry
 * point calls it before it loads anything else, since loading the native module is what crashes.
 */
export function exitUnlessSupportedNode(): void {
  if (isSupportedNode(process.versions.node)) return;
  process.stderr.write(`${unsupportedNodeMessage(process.version)}\n`);
  process.exit(ExitCode.unsupportedNode);
}
