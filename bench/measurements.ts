import { readFileSync } from 'node:fs';
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
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) in parentheses: utime and stime are the
  // 14th and 15th of the line, the 12th and 13th after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
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
