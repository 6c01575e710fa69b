// spool batch run: upload, create, follow live, save the files; and the downloads it shares with other commands.
import { createReadStream, createWriteStream, existsSync, mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { TERMINAL, advance, progressLine, startProgress } from './batch-progress.js';
import { CLIENT_EXIT, ClientUsageError, type Context } from './command.js';
import type { SpoolApi } from './spool-api.js';

export const BATCH_RUN_USAGE = 'spool batch run FILE --job JOB [--endpoint E] [--out DIR] [--metadata key=value]...';

/** Writes a file's content to `path`, streamed. */
export async function download(api: SpoolApi, fileId: string, path: string): Promise<void> {
  const response = await api.openai.files.content(fileId);
  await pipeline(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream), createWriteStream(path));
}

/** The exit code for a batch's final status. */
const exitFor = (status: string) => (status === 'completed' ? CLIENT_EXIT.ok : status === 'failed' ? CLIENT_EXIT.batchFailed : status === 'expired' ? CLIENT_EXIT.batchExpired : status === 'cancelled' ? CLIENT_EXIT.batchCancelled : CLIENT_EXIT.error);

/** Saves a finished batch's output and error files under `dir`; returns their paths. */
export async function saveFiles(api: SpoolApi, batch: { id: string; output_file_id?: string | null; error_file_id?: string | null }, dir: string): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const saved: string[] = [];
  for (const [fileId, suffix] of [
    [batch.output_file_id, 'output'],
    [batch.error_file_id, 'error'],
  ] as const) {
    if (!fileId) continue;
    const path = join(dir, `${batch.id}_${suffix}.jsonl`);
    await download(api, fileId, path);
    saved.push(path);
  }
  return saved;
}

/** The endpoint of a batch input: the url of its first line. */
async function firstLineUrl(path: string): Promise<string | undefined> {
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    lines.close();
    try {
      const url = (JSON.parse(line) as { url?: unknown }).url;
      return typeof url === 'string' ? url : undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * Asks on the terminal whether to cancel; resolves true for yes. A second Ctrl-C while asking
 * resolves false (leave the batch running).
 */
function askToCancel(batchId: string, err: NodeJS.WriteStream): Promise<boolean> {
  return new Promise((resolve) => {
    const prompt = createInterface({ input: process.stdin, output: err });
    const done = (answer: boolean) => {
      prompt.close();
      resolve(answer);
    };
    prompt.once('SIGINT', () => {
      err.write('\n');
      done(false);
    });
    prompt.question(`\nCancel ${batchId}? [y/N] `, (answer) => done(/^y(es)?$/i.test(answer.trim())));
  });
}

export async function runBatch(context: Context): Promise<number> {
  const { api, err } = context;
  const [path] = context.positionals;
  if (!existsSync(path!)) throw new ClientUsageError(`no such file: ${path}`, BATCH_RUN_USAGE);
  const job = context.values.job as string | undefined;
  if (!job) throw new ClientUsageError('batch run needs --job JOB (a job reserved for your model: spool jobs list)', BATCH_RUN_USAGE);
  const endpoint = (context.values.endpoint as string | undefined) ?? (await firstLineUrl(path!));
  if (!endpoint) throw new ClientUsageError('the endpoint is not in the first line: give --endpoint', BATCH_RUN_USAGE);
  const metadata: Record<string, string> = {};
  for (const pair of (context.values.metadata as string[] | undefined) ?? []) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new ClientUsageError(`--metadata takes key=value, got ${JSON.stringify(pair)}`, BATCH_RUN_USAGE);
    metadata[pair.slice(0, at)] = pair.slice(at + 1);
  }
  const outDir = (context.values.out as string | undefined) ?? '.';
  const tty = err.isTTY === true && !context.json;

  const file = await api.openai.files.create({ file: createReadStream(path!), purpose: 'batch' });
  const batch = await api.openai.batches.create({
    input_file_id: file.id,
    endpoint,
    completion_window: 'unlimited',
    job_id: job,
    ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
  } as unknown as Parameters<SpoolApi['openai']['batches']['create']>[0]);
  if (!context.json) err.write(`${basename(path!)} uploaded as ${file.id}; batch ${batch.id} created\n`);

  // Ctrl-C: asks whether to cancel (on a terminal); a second one, or no terminal, leaves it running.
  const following = new AbortController();
  let interrupted = false;
  const onInterrupt = () => {
    if (interrupted) return;
    interrupted = true;
    if (!process.stdin.isTTY) {
      following.abort();
      return;
    }
    void askToCancel(batch.id, err).then(async (cancel) => {
      if (!cancel) {
        following.abort();
        return;
      }
      interrupted = false;
      await api.openai.batches.cancel(batch.id);
      err.write(`cancelling ${batch.id}\n`);
    });
  };
  process.on('SIGINT', onInterrupt);

  let state = startProgress(batch.id);
  let lastPlain = 0;
  let lastDrawn = 0;
  const draw = (force = false) => {
    const now = Date.now();
    if (tty) {
      if (!force && now - lastDrawn < 100) return;
      lastDrawn = now;
      err.write(`\r\u001b[2K${progressLine(state, now)}`);
    } else if (!context.json && (force || now - lastPlain >= 2000)) {
      lastPlain = now;
      err.write(`${progressLine(state, now)}\n`);
    }
  };
  try {
    for await (const event of api.events(batch.id, following.signal)) {
      state = advance(state, event, Date.now());
      draw(TERMINAL.has(state.status));
      if (TERMINAL.has(state.status)) break;
    }
  } catch (error) {
    if (!following.signal.aborted) throw error;
  } finally {
    process.off('SIGINT', onInterrupt);
    if (tty) err.write('\n');
  }
  if (following.signal.aborted) {
    err.write(`left running: ${batch.id} (follow it with: spool batch events ${batch.id} --follow)\n`);
    return CLIENT_EXIT.interrupted;
  }
  const final = await api.openai.batches.retrieve(batch.id);
  const saved = await saveFiles(api, final, outDir);
  if (context.json) context.out.write(`${JSON.stringify({ batch: final, files: saved }, null, 2)}\n`);
  else {
    context.out.write(`${final.id} ${final.status}: ${final.request_counts?.completed ?? 0} completed, ${final.request_counts?.failed ?? 0} failed of ${final.request_counts?.total ?? 0}\n`);
    for (const saved_ of saved) context.out.write(`saved ${saved_}\n`);
  }
  return exitFor(final.status);
}
