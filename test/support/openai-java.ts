import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../src/platform/package-root.js';

const javaDir = join(packageRoot, 'test', 'java');
const pomFile = join(javaDir, 'pom.xml');
const sourceFile = join(javaDir, 'src', 'SpoolStrictClient.java');

/** The openai-java release test/java/pom.xml pins. */
export const OPENAI_JAVA_VERSION = /<openai\.java\.version>([^<]+)<\/openai\.java\.version>/.exec(readFileSync(pomFile, 'utf8'))?.[1] ?? '';

const COMPLETE_MARKER = '.complete';

export interface ProcessResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function runProcess(command: string, args: string[], timeoutMs = 600_000, options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Builds `dir` in a private folder and renames it into place, so an interrupted run never leaves half of it. */
async function buildOnce(dir: string, build: (staging: string) => Promise<void>): Promise<string> {
  if (existsSync(join(dir, COMPLETE_MARKER))) return dir;
  const parent = join(dir, '..');
  mkdirSync(parent, { recursive: true });
  const staging = mkdtempSync(`${dir}-`);
  try {
    await build(staging);
    writeFileSync(join(staging, COMPLETE_MARKER), `${new Date().toISOString()}\n`);
    if (existsSync(join(dir, COMPLETE_MARKER))) return dir;
    rmSync(dir, { recursive: true, force: true });
    renameSync(staging, dir);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return dir;
}

/**
 * The SDK's jars (Maven, cached in .cache/openai-java/<version>/libs) and the client program
 * compiled against them (cached per source hash): Maven and javac run only when either changed.
 * Returns the class path to run SpoolStrictClient with.
 */
export async function buildOpenAiJavaClient(): Promise<string> {
  if (!OPENAI_JAVA_VERSION) throw new Error(`no <openai.java.version> in ${pomFile}`);
  const versionDir = join(packageRoot, '.cache', 'openai-java', OPENAI_JAVA_VERSION);
  const libs = await buildOnce(join(versionDir, 'libs'), async (staging) => {
    const mvn = await runProcess('mvn', ['-B', '-q', '-f', pomFile, 'dependency:copy-dependencies', `-DoutputDirectory=${staging}`]);
    if (mvn.code !== 0) throw new Error(`mvn could not fetch openai-java ${OPENAI_JAVA_VERSION} (exit ${mvn.code}):\n${(mvn.stdout + mvn.stderr).slice(-4000)}`);
  });
  const sourceHash = createHash('sha256').update(readFileSync(sourceFile)).digest('hex').slice(0, 16);
  const classes = await buildOnce(join(versionDir, `classes-${sourceHash}`), async (staging) => {
    const javac = await runProcess('javac', ['-nowarn', '-cp', `${libs}/*`, '-d', staging, sourceFile]);
    if (javac.code !== 0) throw new Error(`javac failed (exit ${javac.code}):\n${javac.stdout}${javac.stderr}`);
  });
  return `${classes}:${libs}/*`;
}

/** Runs the Java client against a service; resolves with its exit code and output. */
export function runOpenAiJavaClient(classPath: string, args: string[]): Promise<ProcessResult> {
  return runProcess('java', ['-Xshare:auto', '-XX:TieredStopAtLevel=1', '-cp', classPath, 'SpoolStrictClient', ...args], 180_000);
}
