import { type DestinationStream, type Logger, pino } from 'pino';
import { censorCredentials, markCensoring } from './credential-censor.js';

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every entry has, shown in the line's fixed columns or not at all. */
const OMITTED = new Set(['level', 'time', 'pid', 'hostname', 'component', 'msg']);

const two = (n: number) => String(n).padStart(2, '0');

function renderValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  if (value instanceof Object && 'message' in value && typeof value.message === 'string') return JSON.stringify(value.message);
  return JSON.stringify(value) ?? String(value);
}

/** One pino JSON entry as a line a person reads: `time level component message key=value…`. */
export function readableLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const at = new Date(typeof entry.time === 'number' ? entry.time : Date.now());
  const time = `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${String(at.getMilliseconds()).padStart(3, '0')}`;
  const level = (LEVEL_NAMES[entry.level as number] ?? String(entry.level)).padEnd(5);
  const component = typeof entry.component === 'string' ? entry.component : 'spool';
  const fields = Object.entries(entry)
    .filter(([key]) => !OMITTED.has(key))
    .map(([key, value]) => `${key}=${renderValue(value)}`);
  return `${[time, level, component, String(entry.msg ?? ''), ...fields].join(' ')}\n`;
}

/** Writes each entry to stdout as a readable line, with no worker thread or extra dependency. */
const readableStdout: DestinationStream = { write: (json: string) => void process.stdout.write(readableLine(json)) };

/**
 * The process's logger: readable lines on a terminal or with LOG_FORMAT=pretty, JSON lines
 * otherwise; every line, its children's too, with credentials censored (censorCredentials).
 */
export function createLogger(options: { level: string; format: 'pretty' | 'json' | undefined }, destination?: DestinationStream): Logger {
  const pretty = options.format === 'pretty' || (options.format === undefined && process.stdout.isTTY === true);
  const settings = { level: options.level, hooks: { streamWrite: censorCredentials } };
  // `destination`: where a test reads the JSON lines instead of stdout.
  return markCensoring(destination ? pino(settings, destination) : pretty ? pino(settings, readableStdout) : pino(settings));
}
