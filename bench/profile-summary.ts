// Summarises a V8 .cpuprofile (from BENCH_PROFILE=DIR, i.e. node --cpu-prof): the functions and
// the files with the most self time.   node dist/bench/profile-summary.js FILE [TOP]
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../src/platform/package-root.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export function summariseProfile(path: string, top = 25): string {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  profile.samples.forEach((id, index) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0)));
  const total = [...self.values()].reduce((sum, value) => sum + value, 0);
  const where = (url: string) => {
    if (!url) return '(native)';
    const file = url.startsWith('file://') ? fileURLToPath(url) : url;
    return file.startsWith(packageRoot) ? relative(packageRoot, file) : file;
  };
  const functions = new Map<string, number>();
  const files = new Map<string, number>();
  for (const [id, micros] of self) {
    const frame = byId.get(id)!.callFrame;
    const name = `${frame.functionName || '(anonymous)'} ${where(frame.url)}${frame.url ? `:${frame.lineNumber + 1}` : ''}`;
    functions.set(name, (functions.get(name) ?? 0) + micros);
    const file = where(frame.url).replace(/^node_modules\/((?:@[^/]+\/)?[^/]+)\/.*$/, 'node_modules/$1');
    files.set(file, (files.get(file) ?? 0) + micros);
  }
  const table = (rows: Map<string, number>) =>
    [...rows]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, micros]) => `${((micros / total) * 100).toFixed(1).padStart(5)}%  ${(micros / 1000).toFixed(0).padStart(7)} ms  ${name}`)
      .join('\n');
  return `total ${(total / 1e6).toFixed(1)} s sampled\n\nself time by function:\n${table(functions)}\n\nself time by file or package:\n${table(files)}\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.stdout.write(summariseProfile(process.argv[2]!, Number(process.argv[3] ?? 25)));
}
