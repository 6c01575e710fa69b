// What every client command is made of: its context, its exit codes, its usage error, and how it prints.
import type { ParseArgsConfig } from 'node:util';
// Types only: the openai package loads when a client command runs, never with `spool serve`.
import type { SpoolApi } from './spool-api.js';

/** Exit codes of the client commands (README): a batch that ends otherwise than completed says how. */
export const CLIENT_EXIT = { ok: 0, error: 1, usage: 2, batchFailed: 4, batchCancelled: 5, batchExpired: 6, interrupted: 130 } as const;

export class ClientUsageError extends Error {
  constructor(
    message: string,
    readonly usage: string,
  ) {
    super(message);
  }
}

export type Options = NonNullable<ParseArgsConfig['options']>;

export interface Context {
  readonly api: SpoolApi;
  readonly json: boolean;
  readonly positionals: string[];
  readonly values: Record<string, string | boolean | string[] | undefined>;
  readonly out: NodeJS.WriteStream;
  readonly err: NodeJS.WriteStream;
}

export interface Command {
  readonly usage: string;
  readonly summary: string;
  readonly options?: Options;
  /** Positional arguments it takes: exactly this many. */
  readonly positionals: number;
  run(context: Context): Promise<number>;
}

/** Prints one object: as JSON with --json, else as `key: value` lines. */
export function show(context: Context, value: unknown): void {
  if (context.json) {
    context.out.write(`${JSON.stringify(value, null, 2)}\n`);
    return;
  }
  const record = value as Record<string, unknown>;
  for (const [key, field] of Object.entries(record)) context.out.write(`${key}: ${typeof field === 'object' && field !== null ? JSON.stringify(field) : String(field)}\n`);
}

/** Prints a list: as JSON with --json, else one line per item of the chosen fields. */
export function showList(context: Context, list: unknown, fields: string[]): void {
  if (context.json) {
    context.out.write(`${JSON.stringify(list, null, 2)}\n`);
    return;
  }
  for (const item of (list as { data: Array<Record<string, unknown>> }).data) context.out.write(`${fields.map((field) => String(item[field] ?? '')).join('\t')}\n`);
}

export const limitOf = (context: Context) => {
  const raw = context.values.limit as string | undefined;
  if (raw === undefined) return 20;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 100) throw new ClientUsageError('--limit must be an integer from 1 to 100', '');
  return Number(raw);
};
