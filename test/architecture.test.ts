import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

// The import rule (docs/ARCHITECTURE.md): dependencies point inward. The domain depends on
// nothing of the project's but itself; the application layer depends on neither driver (src/http,
// processors/); the two drivers do not depend on each other; read models do not depend on the
// application layer; adapters depend on the domain and the platform at most, never on one another;
// configuration knows nothing of the engine or the HTTP layer. The domain uses no package but fp-ts
// and Node's built-ins, and only the schema loader holds Ajv. Read from the import statements of
// the source files themselves.

const root = resolve(import.meta.dirname, '..');

/** The source files of a folder, or the one file named. */
function sourceFiles(folder: string): string[] {
  if (statSync(join(root, folder)).isFile()) return [folder];
  return readdirSync(join(root, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

/** What a source file imports (static, re-exported and dynamic), as written. */
function importSpecifiers(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?\bfrom\s+['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)|(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g)].map(
    (match) => match[1] ?? match[2] ?? match[3]!,
  );
}

/** The project files a source file imports, relative to the root. */
function projectImports(file: string): string[] {
  return importSpecifiers(file)
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) => relative(root, resolve(dirname(join(root, file)), specifier)).replace(/\.js$/, '.ts'));
}

/** The packages a source file imports (Node's built-ins as `node:…`), by package name. */
function packageImports(file: string): string[] {
  return importSpecifiers(file)
    .filter((specifier) => !specifier.startsWith('.'))
    .map((specifier) => (specifier.startsWith('node:') ? specifier : specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/')));
}

interface Rule {
  readonly name: string;
  readonly from: string;
  readonly forbidden: (target: string) => boolean;
}

const ADAPTERS = ['src/engine', 'src/event-store', 'src/blob-store', 'src/message-log'];

const RULES: readonly Rule[] = [
  { name: 'src/domain imports nothing outside src/domain', from: 'src/domain', forbidden: (target) => !target.startsWith('src/domain/') },
  { name: 'src/application imports neither src/http nor processors/', from: 'src/application', forbidden: (target) => target.startsWith('src/http/') || target.startsWith('processors/') },
  { name: 'src/http imports no processor', from: 'src/http', forbidden: (target) => target.startsWith('processors/') },
  { name: 'processors/ import nothing of src/http', from: 'processors', forbidden: (target) => target.startsWith('src/http/') },
  { name: 'src/http imports nothing of src/config.ts: it declares the settings it needs and is handed them', from: 'src/http', forbidden: (target) => target === 'src/config.ts' },
  { name: 'projections/ import no application module', from: 'projections', forbidden: (target) => target.startsWith('src/application/') },
  ...ADAPTERS.map((adapters) => ({
    name: `${adapters} (adapters) import neither the application layer, its drivers nor the read models`,
    from: adapters,
    forbidden: (target: string) => ['src/application/', 'src/http/', 'processors/', 'projections/'].some((layer) => target.startsWith(layer)),
  })),
  // Each adapter stands alone: what two of them share (an S3 client, an s3:// location) is in src/platform.
  ...ADAPTERS.map((adapters) => ({
    name: `${adapters} (an adapter) imports no other adapter`,
    from: adapters,
    forbidden: (target: string) => ADAPTERS.some((other) => other !== adapters && target.startsWith(`${other}/`)),
  })),
  // Configuration is read first and knows nothing of what it configures; the engine is handed its slice of it.
  { name: 'src/config.ts imports nothing of src/engine or src/http', from: 'src/config.ts', forbidden: (target) => target.startsWith('src/engine/') || target.startsWith('src/http/') },
  { name: 'src/engine imports nothing of src/config.ts', from: 'src/engine', forbidden: (target) => target === 'src/config.ts' },
  // The message log is a generic port; Spool's messaging contract (src/messages) uses it, never the other way round.
  { name: 'src/message-log (the port and its adapters) imports nothing of the project outside it but src/platform', from: 'src/message-log', forbidden: (target) => !target.startsWith('src/message-log/') && !target.startsWith('src/platform/') },
  ...['src/domain', 'src/application', 'src/http', 'processors', 'projections', 'src/engine', 'src/event-store', 'src/blob-store', 'src/message-log'].map((layer) => ({
    name: `${layer} imports neither the composition root (src/service.ts) nor its wiring (src/wiring)`,
    from: layer,
    forbidden: (target: string) => target === 'src/service.ts' || target.startsWith('src/wiring/'),
  })),
  // The benchmarks may use the tests' starters (test/support), never the other way round.
  { name: 'the tests import nothing of bench/', from: 'test', forbidden: (target) => target.startsWith('bench/') },
];

interface PackageRule {
  readonly name: string;
  readonly from: string;
  readonly forbidden: (name: string, file: string) => boolean;
}

/** The same for packages (by name; Node's built-ins as `node:…`). */
const PACKAGE_RULES: readonly PackageRule[] = [
  { name: "src/domain imports no package but fp-ts and Node's built-ins", from: 'src/domain', forbidden: (name) => name !== 'fp-ts' && !name.startsWith('node:') },
  // The schema loader owns the Ajv instances and the one wording of a schema's problems.
  ...['src', 'processors', 'projections', 'bench'].map((folder) => ({
    name: `${folder}: Ajv is imported by the schema loader (src/platform/schemas.ts) alone`,
    from: folder,
    forbidden: (name: string, file: string) => (name === 'ajv' || name === 'ajv-formats') && file !== 'src/platform/schemas.ts',
  })),
];

/**
 * Imports that break the rule today and wait for a later move. This list may only shrink: a new
 * entry is a new violation, and an entry that no longer occurs must be removed.
 */
const KNOWN_VIOLATIONS: readonly string[] = [];

function violations(): string[] {
  const found: string[] = [];
  for (const rule of RULES) {
    for (const file of sourceFiles(rule.from)) {
      for (const target of projectImports(file)) if (rule.forbidden(target)) found.push(`${file} → ${target}`);
    }
  }
  for (const rule of PACKAGE_RULES) {
    for (const file of sourceFiles(rule.from)) {
      for (const name of packageImports(file)) if (rule.forbidden(name, file)) found.push(`${file} → package ${name}`);
    }
  }
  return found.sort();
}

describe('the import rule', () => {
  it('reads the imports it checks (the rule cannot pass on an empty reading)', () => {
    expect(projectImports('src/application/batch-lifecycle.ts')).toContain('src/domain/batch.ts');
    expect(projectImports('src/wiring/workers.ts').some((target) => target.startsWith('processors/'))).toBe(true);
    expect(sourceFiles('src/domain')).toContain('src/domain/decider.ts');
    expect(packageImports('src/platform/schemas.ts')).toEqual(expect.arrayContaining(['node:fs', 'ajv', 'ajv-formats']));
    expect(packageImports('src/http/app.ts')).toContain('@fastify/multipart');
  });

  it('reads the imports of a rule that names one file', () => {
    expect(sourceFiles('src/config.ts')).toEqual(['src/config.ts']);
    expect(projectImports('src/config.ts')).toContain('src/platform/s3-location.ts');
  });

  it('holds everywhere but the known violations, which may only shrink', () => {
    expect(violations()).toEqual([...KNOWN_VIOLATIONS].sort());
  });

  // The domain is pure: the same arguments give the same answer in any process at any time, so it
  // keeps nothing between calls (a memo belongs to whoever calls it, as LineOutcomeLog's id maker).
  it('keeps src/domain free of module-level mutable state', () => {
    const mutable = /^(?:export\s+)?(?:let|var)\s|^(?:export\s+)?const\s+\w+(?:\s*:[^=]+)?\s*=\s*new\s+(?:Map|Set|WeakMap|WeakSet|Array)\b/m;
    expect(sourceFiles('src/domain').filter((file) => mutable.test(readFileSync(join(root, file), 'utf8')))).toEqual([]);
  });
});

describe('the folder map in docs/ARCHITECTURE.md', () => {
  it('lists every folder of the tree that holds a tracked file, and no other', () => {
    const doc = readFileSync(join(root, 'docs/ARCHITECTURE.md'), 'utf8');
    const block = /<!-- folder-map -->\s*```\n([\s\S]*?)```/.exec(doc)?.[1] ?? '';
    const mapped = block.split('\n').map((line) => line.split(/\s+/)[0]!).filter(Boolean).map((folder) => folder.replace(/\/$/, ''));
    const tracked = trackedFiles();
    const folders = [...new Set(tracked.map((file) => dirname(file)).filter((folder) => folder !== '.'))];
    expect(mapped.length).toBeGreaterThan(10);
    expect([...mapped].sort()).toEqual(folders.sort());
  });
});

/** The repository's files: git's list in a checkout, else every file but built, fetched and generated ones. */
function trackedFiles(): string[] {
  try {
    return execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n').filter(Boolean);
  } catch {
    const skipped = new Set(['node_modules', 'dist', 'data', '.cache', '.git', 'target']);
    return readdirSync(root, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => relative(root, join(entry.parentPath, entry.name)))
      .filter((file) => !file.split('/').some((part) => skipped.has(part)));
  }
}

