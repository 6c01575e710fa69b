import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { MiniLmFiles } from './minilm-files.js';

/** sentence-transformers' max_seq_length for all-MiniLM-L6-v2: longer inputs are cut to it. */
export const MAX_INPUT_TOKENS = 256;
export const DIMENSIONS = 384;

/**
 * tokenizer_config.json as published beside the model's tokenizer.json (the jar carries only the
 * latter): a lower-casing BERT WordPiece tokenizer.
 */
const TOKENIZER_CONFIG = {
  tokenizer_class: 'BertTokenizer',
  do_lower_case: true,
  tokenize_chinese_chars: true,
  strip_accents: null,
  model_max_length: 512,
  clean_up_tokenization_spaces: true,
  cls_token: '[CLS]',
  sep_token: '[SEP]',
  pad_token: '[PAD]',
  unk_token: '[UNK]',
  mask_token: '[MASK]',
};

/** One input as the model reads it: token ids with [CLS] first and [SEP] last, at most MAX_INPUT_TOKENS. */
export type TokenIds = readonly number[];

/** Each input's vector, and, where asked for, its JSON as OpenAI writes it (`[numbers]` or `"base64"`). */
export interface Embedded {
  readonly vectors: Float32Array[];
  readonly texts: ReadonlyArray<string | null>;
}

export type VectorFormat = 'float' | 'base64';

interface Pending {
  readonly inputs: readonly TokenIds[];
  readonly format: VectorFormat | null;
  resolve(embedded: Embedded): void;
  reject(error: unknown): void;
}

/** One of the model's threads: a session of its own, one run at a time. */
interface ModelThread {
  readonly worker: Worker;
  /** The requests of the run it is working on; undefined while it is free. */
  running: Pending[] | undefined;
}

export interface SentenceEmbedderSettings {
  /** Most inputs in one run of a thread: what has queued meanwhile goes together, up to this (a larger request runs alone). */
  readonly maxBatchInputs?: number;
  /** Threads running the model, each with a session of its own; default: the machine's cores, at most MAX_MODEL_THREADS. */
  readonly threads?: number;
}

/**
 * Model threads by default at most: each holds its own copy of the model and its buffers (tens of
 * MiB), and past a few, the cores serve a thread's own session better (onnxruntime's threads).
 */
const MAX_MODEL_THREADS = 4;
/** Inputs in one run by default: with MINILM_CONCURRENCY (128) in flight, two runs wait while two run. */
const DEFAULT_BATCH_INPUTS = 32;

const threadModule = new URL(import.meta.url.endsWith('.ts') ? './embedding-thread.ts' : './embedding-thread.js', import.meta.url);

type FromThread = { ready: true } | { error: string } | { vectors: Float32Array; width: number; texts: Array<string | null> };

/**
 * all-MiniLM-L6-v2 on onnxruntime's CPU provider: mean pooling over the attention mask, then L2
 * normalisation, as the model was trained to be used. The model runs on threads of its own
 * (embedding-thread.ts): onnxruntime-node runs a session synchronously on its caller's thread.
 * Requests queue here, and each free thread takes what has queued, whole requests up to the batch
 * size, as one run, so concurrent requests share runs as a batching server's do.
 *
 * Several threads, each with its own session and one onnxruntime thread, rather than one session
 * whose runs are split across the cores: a split run waits at every operator for its slowest
 * part, and the main loop (recording the answers, tokenizing the next requests) takes a core from
 * one part now and then, stalling both; separate runs each go on at their own pace. Called
 * directly on 2 cores, two such threads embedded 5–10% more sentences a second than one session
 * on two (bench/FINDINGS.md, 2026-11-29 night).
 */
export class SentenceEmbedder {
  private readonly queue: Pending[] = [];
  private scheduled = false;
  private runCount = 0;
  private failure: Error | undefined;
  private readonly maxBatchInputs: number;
  private readonly clsId: number;
  private readonly sepId: number;

  private constructor(
    private readonly threads: readonly ModelThread[],
    private readonly tokenizer: { encode(text: string): { ids: number[] } },
    readonly vocabularySize: number,
    settings: SentenceEmbedderSettings,
  ) {
    this.maxBatchInputs = settings.maxBatchInputs ?? DEFAULT_BATCH_INPUTS;
    const ids = tokenizer.encode('');
    this.clsId = ids.ids[0]!;
    this.sepId = ids.ids[ids.ids.length - 1]!;
    for (const thread of threads) {
      thread.worker.on('message', (message: FromThread) => this.answered(thread, message));
      thread.worker.once('exit', (code) => this.fail(new Error(`the embedding model's thread stopped (exit ${code})`)));
      thread.worker.once('error', (error) => this.fail(error));
    }
  }

  /** Loads the model on its threads; the tokenizer is imported only here, by a process that serves it. */
  static async load(files: MiniLmFiles, settings: SentenceEmbedderSettings = {}): Promise<SentenceEmbedder> {
    const [{ Tokenizer }, tokenizerJson] = await Promise.all([import('@huggingface/tokenizers'), readFile(files.tokenizer, 'utf8')]);
    const parsed = JSON.parse(tokenizerJson) as { model: { vocab: Record<string, number> } };
    const tokenizer = new Tokenizer(parsed, TOKENIZER_CONFIG);
    const cores = availableParallelism();
    const count = Math.max(1, settings.threads ?? Math.min(cores, MAX_MODEL_THREADS));
    // The cores shared out: one onnxruntime thread each on 2 cores, four each for 4 threads on 16.
    const workerData = { model: files.model, threads: Math.max(1, Math.floor(cores / count)) };
    const workers = Array.from({ length: count }, () => new Worker(threadModule, { workerData }));
    // The model's threads never hold the process open: the fleet's stop ends them.
    for (const worker of workers) worker.unref();
    try {
      await Promise.all(workers.map(loaded));
    } catch (error) {
      await Promise.all(workers.map((worker) => worker.terminate()));
      throw error;
    }
    return new SentenceEmbedder(
      workers.map((worker) => ({ worker, running: undefined })),
      tokenizer,
      Object.keys(parsed.model.vocab).length,
      settings,
    );
  }

  /** false once one of its threads has stopped: a new embedder must be loaded. */
  get usable(): boolean {
    return this.failure === undefined;
  }

  /** A text as the model reads it, cut to MAX_INPUT_TOKENS (its last kept token then [SEP]). */
  tokenize(text: string): TokenIds {
    return this.bounded(this.tokenizer.encode(text).ids);
  }

  /** Token ids given by the caller (OpenAI's array-of-ids input), framed by [CLS] and [SEP] and cut likewise. */
  frame(ids: readonly number[]): TokenIds {
    return this.bounded([this.clsId, ...ids, this.sepId]);
  }

  private bounded(ids: number[]): TokenIds {
    if (ids.length <= MAX_INPUT_TOKENS) return ids;
    return [...ids.slice(0, MAX_INPUT_TOKENS - 1), this.sepId];
  }

  /** Unit vectors of DIMENSIONS floats, one per input, in order. */
  async embed(inputs: readonly TokenIds[]): Promise<Float32Array[]> {
    return (await this.queued(inputs, null)).vectors;
  }

  /** The vectors and their JSON in `format`, written on the model's thread (a batch line's answer is only written out). */
  embedAsJson(inputs: readonly TokenIds[], format: VectorFormat): Promise<Embedded> {
    return this.queued(inputs, format);
  }

  private queued(inputs: readonly TokenIds[], format: VectorFormat | null): Promise<Embedded> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.queue.push({ inputs, format, resolve, reject });
      if (this.scheduled) return;
      // Free threads start after the current turn of the event loop: the requests its pool sends
      // together (as slots free up all at once when a run's answers come back) go in one run, not
      // a run of one followed by one of the rest.
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.dispatch();
      });
    });
  }

  /** Runs of the model so far (a run holds the requests queued when a thread took it, up to the batch size). */
  get runs(): number {
    return this.runCount;
  }

  /** The threads running the model. */
  get threadCount(): number {
    return this.threads.length;
  }

  /** Its threads working on a run now. */
  get threadsRunning(): number {
    return this.threads.filter((thread) => thread.running).length;
  }

  async close(): Promise<void> {
    this.fail(new Error('the embedding model was closed'));
    await Promise.all(this.threads.map((thread) => thread.worker.terminate()));
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const thread of this.threads) {
      for (const pending of thread.running ?? []) pending.reject(error);
      thread.running = undefined;
    }
    for (const pending of this.queue.splice(0)) pending.reject(error);
  }

  /** Gives each free thread a run: whole requests in arrival order, up to the batch size (a larger one runs alone). */
  private dispatch(): void {
    for (const thread of this.threads) {
      if (this.failure || this.queue.length === 0) return;
      if (thread.running) continue;
      const taken: Pending[] = [this.queue.shift()!];
      let count = taken[0]!.inputs.length;
      while (this.queue.length > 0 && count + this.queue[0]!.inputs.length <= this.maxBatchInputs) {
        count += this.queue[0]!.inputs.length;
        taken.push(this.queue.shift()!);
      }
      thread.running = taken;
      this.runCount += 1;
      thread.worker.postMessage({ rows: taken.flatMap((pending) => pending.inputs), formats: taken.flatMap((pending) => pending.inputs.map(() => pending.format)) });
    }
  }

  private answered(thread: ModelThread, message: FromThread): void {
    const taken = thread.running;
    if (!taken) return;
    thread.running = undefined;
    if ('error' in message) {
      const error = new Error(`the embedding model failed: ${message.error}`);
      for (const pending of taken) pending.reject(error);
    } else if ('vectors' in message) {
      let row = 0;
      for (const pending of taken) {
        const vectors: Float32Array[] = [];
        for (let at = 0; at < pending.inputs.length; at++, row++) vectors.push(message.vectors.subarray(row * message.width, (row + 1) * message.width));
        pending.resolve({ vectors, texts: message.texts.slice(row - pending.inputs.length, row) });
      }
    }
    // What queued while it ran goes at once: the thread is not kept waiting for the answers' turn.
    this.dispatch();
  }
}

/** Resolves once a model thread has loaded its session; rejects with why it could not. */
function loaded(worker: Worker): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const early = (code: number) => reject(new Error(`the embedding model's thread stopped while loading (exit ${code})`));
    // An error thrown in the thread before it answers: a rejection here, never an unhandled 'error'.
    const failed = (error: Error) => reject(new Error(`the embedding model could not be loaded: ${error.message}`));
    worker.once('exit', early);
    worker.once('error', failed);
    worker.once('message', (message: FromThread) => {
      worker.off('exit', early);
      worker.off('error', failed);
      if ('ready' in message) resolve();
      else reject(new Error(`the embedding model could not be loaded: ${'error' in message ? message.error : 'no answer'}`));
    });
  });
}
