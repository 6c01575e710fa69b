// spool batch | files | jobs | weights: a client of a running Spool on the official openai package.
// Each command is an entry of one table: its usage line, its options (node's util.parseArgs reads
// them) and what it does. Output is for people, or one JSON document with --json.
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { BATCH_RUN_USAGE, download, runBatch, saveFiles } from './batch-run.js';
import { CLIENT_EXIT, ClientUsageError, type Command, type Context, type Options, limitOf, show, showList } from './command.js';
// Types only: the openai package loads when a client command runs, never with `spool serve`.
import type { Connection } from './spool-api.js';

export { CLIENT_EXIT, ClientUsageError } from './command.js';

const COMMON: Options = {
  'base-url': { type: 'string' },
  'api-key': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

const COMMON_HELP = `  --base-url URL   where Spool serves (SPOOL_BASE_URL; default http://127.0.0.1:8080)
  --api-key KEY    the API key for /mgmt/v1 (SPOOL_API_KEY); an account's key where accounts are on
  --json           one JSON document on stdout instead of text
  -h, --help       this help`;

/** A command that shows what one request answers about the object its argument names. */
const showAnswer =
  (method: string, path: (id: string) => string): Command['run'] =>
  async (context) => {
    show(context, await context.api.json(method, path(encodeURIComponent(context.positionals[0]!))));
    return CLIENT_EXIT.ok;
  };

/** A command that shows a list, a line of `columns` for each item. */
const showListAt =
  (path: (context: Context) => string, columns: string[]): Command['run'] =>
  async (context) => {
    showList(context, await context.api.json('GET', path(context)), columns);
    return CLIENT_EXIT.ok;
  };

const COMMANDS: Record<string, Command> = {
  'batch run': {
    usage: BATCH_RUN_USAGE,
    summary: 'upload FILE, create a batch on JOB, follow it live, save its output and error files',
    positionals: 1,
    options: { job: { type: 'string' }, endpoint: { type: 'string' }, out: { type: 'string' }, metadata: { type: 'string', multiple: true } },
    run: runBatch,
  },
  'batch list': {
    usage: 'spool batch list [--limit N]',
    summary: 'the newest batches',
    positionals: 0,
    options: { limit: { type: 'string' } },
    run: showListAt((context) => `/v1/batches?limit=${limitOf(context)}`, ['id', 'status', 'endpoint', 'job_id', 'created_at']),
  },
  'batch get': {
    usage: 'spool batch get BATCH_ID',
    summary: 'one batch',
    positionals: 1,
    run: showAnswer('GET', (id) => `/v1/batches/${id}`),
  },
  'batch cancel': {
    usage: 'spool batch cancel BATCH_ID',
    summary: 'cancel a batch (lines in flight finish; the rest go to the error file)',
    positionals: 1,
    run: showAnswer('POST', (id) => `/v1/batches/${id}/cancel`),
  },
  'batch download': {
    usage: 'spool batch download BATCH_ID [--out DIR]',
    summary: "save a batch's output and error files under DIR (default .)",
    positionals: 1,
    options: { out: { type: 'string' } },
    run: async (context) => {
      const batch = await context.api.json<{ id: string; output_file_id: string | null; error_file_id: string | null }>('GET', `/v1/batches/${encodeURIComponent(context.positionals[0]!)}`);
      const saved = await saveFiles(context.api, batch, (context.values.out as string | undefined) ?? '.');
      if (context.json) context.out.write(`${JSON.stringify({ files: saved })}\n`);
      else for (const path of saved) context.out.write(`saved ${path}\n`);
      return CLIENT_EXIT.ok;
    },
  },
  'batch events': {
    usage: 'spool batch events BATCH_ID [--follow]',
    summary: "a batch's audit events, one JSON object a line; --follow: live, until it ends",
    positionals: 1,
    options: { follow: { type: 'boolean' } },
    run: async (context) => {
      const batchId = context.positionals[0]!;
      if (context.values.follow) {
        const stop = new AbortController();
        const onInterrupt = () => stop.abort();
        process.once('SIGINT', onInterrupt);
        try {
          for await (const event of context.api.events(batchId, stop.signal)) context.out.write(`${JSON.stringify(event)}\n`);
        } catch (error) {
          if (!stop.signal.aborted) throw error;
        } finally {
          process.off('SIGINT', onInterrupt);
        }
        return CLIENT_EXIT.ok;
      }
      let after: string | undefined;
      for (;;) {
        const page = await context.api.json<{ data: Array<{ id: string }>; has_more: boolean }>('GET', `/v1/batches/${encodeURIComponent(batchId)}/events?limit=1000${after ? `&after=${after}` : ''}`);
        for (const event of page.data) context.out.write(`${JSON.stringify(event)}\n`);
        if (!page.has_more || page.data.length === 0) return CLIENT_EXIT.ok;
        after = page.data.at(-1)!.id;
      }
    },
  },
  'files upload': {
    usage: 'spool files upload FILE [--purpose batch]',
    summary: 'upload a file',
    positionals: 1,
    options: { purpose: { type: 'string' } },
    run: async (context) => {
      const purpose = ((context.values.purpose as string | undefined) ?? 'batch') as 'batch';
      show(context, await context.api.openai.files.create({ file: createReadStream(context.positionals[0]!), purpose }));
      return CLIENT_EXIT.ok;
    },
  },
  'files list': {
    usage: 'spool files list [--limit N]',
    summary: 'the newest files',
    positionals: 0,
    options: { limit: { type: 'string' } },
    run: showListAt((context) => `/v1/files?limit=${limitOf(context)}`, ['id', 'filename', 'purpose', 'bytes', 'created_at']),
  },
  'files get': {
    usage: 'spool files get FILE_ID',
    summary: 'one file',
    positionals: 1,
    run: showAnswer('GET', (id) => `/v1/files/${id}`),
  },
  'files download': {
    usage: 'spool files download FILE_ID [--out PATH]',
    summary: "save a file's content (default: to stdout)",
    positionals: 1,
    options: { out: { type: 'string' } },
    run: async (context) => {
      const out = context.values.out as string | undefined;
      if (out) await download(context.api, context.positionals[0]!, out);
      else {
        const response = await context.api.openai.files.content(context.positionals[0]!);
        await pipeline(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream), context.out, { end: false });
      }
      return CLIENT_EXIT.ok;
    },
  },
  'files delete': {
    usage: 'spool files delete FILE_ID',
    summary: 'delete a file',
    positionals: 1,
    run: showAnswer('DELETE', (id) => `/v1/files/${id}`),
  },
  'jobs list': {
    usage: 'spool jobs list',
    summary: 'the jobs reserved (needs the API key)',
    positionals: 0,
    run: showListAt(() => '/mgmt/v1/jobs', ['job_id', 'model', 'sla', 'price_1m_tokens', 'use_case']),
  },
  'jobs reserve': {
    usage: 'spool jobs reserve JOB_ID --model MODEL --sla 24h|7d|none [--use-case TEXT] [--price USD_PER_1M_TOKENS]',
    summary: 'reserve a job for a model (needs the API key)',
    positionals: 1,
    options: { model: { type: 'string' }, sla: { type: 'string' }, 'use-case': { type: 'string' }, price: { type: 'string' } },
    run: async (context) => {
      const { model, sla } = context.values as { model?: string; sla?: string };
      if (!model || !sla) throw new ClientUsageError('jobs reserve needs --model and --sla', COMMANDS['jobs reserve']!.usage);
      const price = Number((context.values.price as string | undefined) ?? '0');
      if (!Number.isFinite(price) || price < 0) throw new ClientUsageError('--price must be a number of USD per million tokens', COMMANDS['jobs reserve']!.usage);
      show(context, await context.api.json('POST', '/mgmt/v1/jobs', { job_id: context.positionals[0], model, sla, use_case: (context.values['use-case'] as string | undefined) ?? 'cli', price_1m_tokens: price }));
      return CLIENT_EXIT.ok;
    },
  },
  'weights stage': {
    usage: 'spool weights stage MODEL=s3://bucket/prefix/ [MODEL=…]',
    summary: 'validate and stage checkpoints for the next reload (needs the API key)',
    positionals: -1,
    run: (context) => weightsRequest(context, 'upload'),
  },
  'weights reload': {
    usage: 'spool weights reload MODEL=s3://bucket/prefix/ [MODEL=…]',
    summary: 'reload the staged checkpoints, replica by replica (needs the API key)',
    positionals: -1,
    run: (context) => weightsRequest(context, 'reload'),
  },
  'weights status': {
    usage: 'spool weights status',
    summary: "each model's weights: serving, staged, the latest sync (needs the API key)",
    positionals: 0,
    run: async (context) => {
      const status = await context.api.json<{ models: Record<string, unknown> }>('GET', '/mgmt/v1/weights/status');
      if (context.json) context.out.write(`${JSON.stringify(status, null, 2)}\n`);
      else for (const [model, entry] of Object.entries(status.models)) context.out.write(`${model}\t${JSON.stringify(entry)}\n`);
      return CLIENT_EXIT.ok;
    },
  },
};

async function weightsRequest(context: Context, step: 'upload' | 'reload'): Promise<number> {
  const usage = COMMANDS[step === 'upload' ? 'weights stage' : 'weights reload']!.usage;
  if (context.positionals.length === 0) throw new ClientUsageError('name at least one MODEL=LOCATION', usage);
  const weights: Record<string, string> = {};
  for (const pair of context.positionals) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new ClientUsageError(`expected MODEL=LOCATION, got ${JSON.stringify(pair)}`, usage);
    weights[pair.slice(0, at)] = pair.slice(at + 1);
  }
  show(context, await context.api.json('POST', `/mgmt/v1/weights/${step}`, { weights }));
  return CLIENT_EXIT.ok;
}

/** The client commands' part of `spool --help`. */
export function clientUsage(): string {
  const groups = ['batch', 'files', 'jobs', 'weights'];
  return groups.map((group) => `  ${group} ${Object.keys(COMMANDS).filter((name) => name.startsWith(`${group} `)).map((name) => name.slice(group.length + 1)).join('|')}`).join('\n');
}

/** The help of one group (`spool batch --help`) or command (`spool batch run --help`). */
function help(name: string): string {
  const command = COMMANDS[name];
  if (command) return `usage: ${command.usage}\n\n${command.summary}\n\noptions:\n${COMMON_HELP}`;
  const members = Object.entries(COMMANDS).filter(([key]) => key.startsWith(`${name} `));
  return `usage: spool ${name} <command>\n\ncommands:\n${members.map(([key, entry]) => `  ${key.slice(name.length + 1).padEnd(10)} ${entry.summary}`).join('\n')}\n\nEach takes --help.`;
}

export const CLIENT_GROUPS = new Set(['batch', 'files', 'jobs', 'weights']);

/** Runs `spool <group> <command> ...`; resolves with the exit code. */
export async function runClientCommand(argv: readonly string[], streams: { out: NodeJS.WriteStream; err: NodeJS.WriteStream } = { out: process.stdout, err: process.stderr }): Promise<number> {
  const [group, action, ...rest] = argv;
  if (!action || action === '--help' || action === '-h') {
    streams.out.write(`${help(group!)}\n`);
    return action ? CLIENT_EXIT.ok : CLIENT_EXIT.usage;
  }
  const name = `${group} ${action}`;
  const command = COMMANDS[name];
  if (!command) throw new ClientUsageError(`unknown command: spool ${name}`, help(group!));
  const { values, positionals } = (() => {
    try {
      return parseArgs({ args: rest, options: { ...COMMON, ...command.options }, allowPositionals: true, strict: true });
    } catch (error) {
      throw new ClientUsageError((error as Error).message, `usage: ${command.usage}`);
    }
  })();
  if (values.help) {
    streams.out.write(`${help(name)}\n`);
    return CLIENT_EXIT.ok;
  }
  if (command.positionals >= 0 && positionals.length !== command.positionals) {
    throw new ClientUsageError(`spool ${name} takes ${command.positionals} argument${command.positionals === 1 ? '' : 's'}, got ${positionals.length}`, `usage: ${command.usage}`);
  }
  const connection: Connection = {
    baseUrl: ((values['base-url'] as string | undefined) ?? process.env.SPOOL_BASE_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, ''),
    apiKey: (values['api-key'] as string | undefined) ?? process.env.SPOOL_API_KEY,
  };
  const { SpoolApi: Api } = await import('./spool-api.js');
  return command.run({ api: new Api(connection), json: values.json === true, positionals, values: values as Context['values'], out: streams.out, err: streams.err });
}
