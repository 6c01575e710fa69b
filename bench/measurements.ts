import { readFileSync, readdirSync } from 'node:fs';
import { parsePrometheusText } from '../src/engine/engine-load-metrics.js';

/** Peak resident set size of a live process, in MiB (VmHWM: the kernel's own high-water mark). */
export function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
  return kib / 1024;
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on every Linux that matters). */
const TICKS_PER_SECOND = 100;

/** CPU time (user + system, every thread) a live process has used so far, in seconds. */
export function cpuSeconds(pid: number): number {
  return statCpuSeconds(readFileSync(`/proc/${pid}/stat`, 'utf8'));
}

/** User + system seconds of a /proc stat line (a process's or one of its threads'). */
function statCpuSeconds(stat: string): number {
  // Fields after the command name (which may hold spaces) in parentheses: utime and stime are the
  // 14th and 15th of the line, the 12th and 13th after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

/** What a Spool process's threads are, by the name Linux gives each (its main thread by its id). */
export type ThreadKind = 'main' | 'engineIo' | 'v8Helpers' | 'libuvPool' | 'other';

export const THREAD_KINDS: readonly ThreadKind[] = ['main', 'engineIo', 'v8Helpers', 'libuvPool', 'other'];

/** A figure for each kind of thread. */
export function byThreadKind(figure: (kind: ThreadKind) => number): Record<ThreadKind, number> {
  return Object.fromEntries(THREAD_KINDS.map((kind) => [kind, figure(kind)])) as Record<ThreadKind, number>;
}

/** How RESULTS.md names each kind of thread's figure (ms per 1,000 lines). */
export function threadFigures(ms: Record<ThreadKind, number>): string {
  return `main thread ${ms.main.toFixed(0)}, engine I/O thread ${ms.engineIo.toFixed(0)}, V8's helper threads ${ms.v8Helpers.toFixed(0)}, libuv's pool ${ms.libuvPool.toFixed(0)}, other ${ms.other.toFixed(0)}`;
}

function threadKind(pid: number, tid: number, name: string): ThreadKind {
  if (tid === pid) return 'main';
  // Node names a worker_threads thread so: in a service process, the engine I/O thread (and the
  // embedding model's threads, where it runs one).
  if (name === 'WorkerThread') return 'engineIo';
  // V8's platform threads: garbage collection's parallel and concurrent work, compiling.
  if (name === 'V8Worker') return 'v8Helpers';
  if (name === 'libuv-worker') return 'libuvPool';
  return 'other';
}

/** CPU time (user + system) a live process has used so far, in seconds, summed by kind of thread. */
export function cpuSecondsByThread(pid: number): Record<ThreadKind, number> {
  const sums: Record<ThreadKind, number> = { main: 0, engineIo: 0, v8Helpers: 0, libuvPool: 0, other: 0 };
  for (const entry of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${entry}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    sums[threadKind(pid, Number(entry), name)] += statCpuSeconds(stat);
  }
  return sums;
}

/** What each kind of thread used between two readings of cpuSecondsByThread (a thread that ended between them is not counted). */
export function threadCpuBetween(before: Record<ThreadKind, number>, after: Record<ThreadKind, number>): Record<ThreadKind, number> {
  return byThreadKind((kind) => Math.max(0, after[kind] - before[kind]));
}

/**
 * Bytes a live process has handed to write calls so far (/proc's wchar: files and sockets alike).
 * Unlike its time, what a process writes for the same work does not move with a busy machine.
 */
export function bytesWritten(pid: number): number {
  return Number(/^wchar:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? NaN);
}

/** Resident set size of a live process now, in MiB. */
export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
}

/** A gauge of a Prometheus text exposition summed over its labels (0 when absent): a reader of each gauge by name. */
export function gaugeSums(text: string): (name: string) => number {
  const samples = parsePrometheusText(text);
  return (name) => samples.reduce((sum, sample) => (sample.name === name ? sum + sample.value : sum), 0);
}
