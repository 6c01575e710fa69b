import type { Logger } from 'pino';

/** Names of the request headers that carry credentials. */
const CREDENTIAL_NAMES = ['authorization', 'proxy-authorization', 'cookie'];
const CREDENTIAL_KEYS = new Set(CREDENTIAL_NAMES);
/** A JSON key naming one of them, in any letter case: the only lines worth a closer look. */
const CREDENTIAL_KEY = new RegExp(`"(?:${CREDENTIAL_NAMES.join('|')})":`, 'i');
/** Such a key with a string value, for a line that is not JSON after all. */
const CREDENTIAL_STRING = new RegExp(`("(?:${CREDENTIAL_NAMES.join('|')})":)"(?:[^"\\\\]|\\\\.)*"`, 'gi');
const CENSOR = '[redacted]';

/**
 * A finished log line with the value of every `authorization`, `proxy-authorization` and `cookie`
 * key in it, at any depth, replaced by "[redacted]" (the same line where it has none: almost
 * every line, found with one regular-expression test).
 *
 * Credentials never reach a log line, at any level (@fastify/multipart logs its parser's options,
 * the request's headers among them, at trace). This looks at the line as written, after every
 * serializer, so no shape of logged object escapes it. It replaced pino's `redact` on the HTTP
 * logger, whose paths had to begin with a wildcard to reach headers under any key: every value of
 * every request's two log lines was then copied and walked, five paths parsed again each time,
 * about 30 MB of garbage in a wave of a thousand small batches (bench/FINDINGS.md, 2026-11-30
 * night).
 */
export function censorCredentials(line: string): string {
  if (!CREDENTIAL_KEY.test(line)) return line;
  const end = line.endsWith('\n') ? '\n' : '';
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return line.replace(CREDENTIAL_STRING, `$1"${CENSOR}"`);
  }
  censor(entry);
  return JSON.stringify(entry) + end;
}

function censor(value: unknown): void {
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const item of value) censor(item);
    return;
  }
  const object = value as Record<string, unknown>;
  for (const key of Object.keys(object)) {
    if (CREDENTIAL_KEYS.has(key.toLowerCase())) object[key] = CENSOR;
    else censor(object[key]);
  }
}

/** Loggers whose every line goes through censorCredentials (their children too). */
const censoring = new WeakSet<object>();

/** Records that the logger's lines, and its children's, are censored (its streamWrite hook is censorCredentials). */
export function markCensoring(logger: Logger): Logger {
  censoring.add(logger);
  return logger;
}

/** Whether the logger's lines are censored: it, or a logger it is a child of, was marked. */
export function censorsCredentials(logger: Logger): boolean {
  // A pino child is made with Object.create(parent).
  for (let at: object | null = logger; at !== null; at = Object.getPrototypeOf(at) as object | null) if (censoring.has(at)) return true;
  return false;
}

/** For a logger given from outside (a test's, an embedder's) whose lines are not censored: pino's redaction of the paths where request headers appear. */
export const CREDENTIAL_REDACTION = {
  paths: ['headers.authorization', '*.headers.authorization', '*.*.headers.authorization', 'headers.cookie', '*.headers.cookie'],
  censor: CENSOR,
};
