import { readFile } from 'node:fs/promises';
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

export interface SentenceEmbedderSettings {
  /** Most inputs in one run of the model: what has queued meanwhile goes together, up to this. */
  readonly maxBatchInputs?: number;
  /** onnxruntime's threads for one run; default: its own (the machine's cores). */
  readonly threads?: number;
}

const threadModule = new URL(import.meta.url.endsWith('.ts') ? './embedding-thread.ts' : './embedding-thread.js', import.meta.url);

type FromThread = { ready: true } | { error: string; id?: number } | { id: number; vectors: Float32Array; width: number; texts: Array<string | null> };

/**
 * all-MiniLM-L6-v2 on onnxruntime's CPU provider: mean pooling over the attention mask, then L2
 * normalisation, as the model was trained to be used. The model runs on a thread of its own
 * (embedding-thread.ts): onnxruntime-node runs a session synchronously on its caller's thread.
 * While one run is under way the inputs of every request that arrives queue, and the next run
 * takes them together, so concurrent requests share runs as a batching server's do.
 */
export class SentenceEmbedder {
  private readonly queue: Pending[] = [];
  private running = false;
  private runCount = 0;
  private nextRun = 0;
  private readonly runs_ = new Map<number, { resolve(embedded: Embedded): void; reject(error: unknown): void }>();
  private failure: Error | undefined;
  private readonly maxBatchInputs: number;
  private readonly clsId: number;
  private readonly sepId: number;

  private constructor(
    private readonly thread: Worker,
    private readonly tokenizer: { encode(text: string): { ids: number[] } },
    readonly vocabularySize: number,
    settings: SentenceEmbedderSettings,
  ) {
    this.maxBatchInputs = settings.maxBatchInputs ?? 64;
    const ids = tokenizer.encode('');
    this.clsId = ids.ids[0]!;
    this.sepId = ids.ids[ids.ids.length - 1]!;
    thread.on('message', (message: FromThread) => {
      if (!('id' in message) || message.id === undefined) return;
      const run = this.runs_.get(message.id);
      this.runs_.delete(message.id);
      if ('error' in message) return run?.reject(new Error(`the embedding model failed: ${message.error}`));
      const vectors: Float32Array[] = [];
      for (let at = 0; at < message.vectors.length; at += message.width) vectors.push(message.vectors.subarray(at, at + message.width));
      run?.resolve({ vectors, texts: message.texts });
    });
    thread.once('exit', (code) => this.fail(new Error(`the embedding model's thread stopped (exit ${code})`)));
    thread.once('error', (error) => this.fail(error));
  }

  /** Loads the model on its thread; the tokenizer is imported only here, by a process that serves it. */
  static async load(files: MiniLmFiles, settings: SentenceEmbedderSettings = {}): Promise<SentenceEmbedder> {
    const [{ Tokenizer }, tokenizerJson] = await Promise.all([import('@huggingface/tokenizers'), readFile(files.tokenizer, 'utf8')]);
    const parsed = JSON.parse(tokenizerJson) as { model: { vocab: Record<string, number> } };
    const tokenizer = new Tokenizer(parsed, TOKENIZER_CONFIG);
    const thread = new Worker(threadModule, { workerData: { model: files.model, ...(settings.threads ? { threads: settings.threads } : {}) } });
    // The model's thread never holds the process open: the fleet's stop ends it.
    thread.unref();
    await new Promise<void>((resolve, reject) => {
      const early = (code: number) => reject(new Error(`the embedding model's thread stopped while loading (exit ${code})`));
      // An error thrown in the thread before it answers: a rejection here, never an unhandled 'error'.
      const failed = (error: Error) => reject(new Error(`the embedding model could not be loaded: ${error.message}`));
      thread.once('exit', early);
      thread.once('error', failed);
      thread.once('message', (message: FromThread) => {
        thread.off('exit', early);
        thread.off('error', failed);
        if ('ready' in message) resolve();
        else {
          void thread.terminate();
          reject(new Error(`the embedding model could not be loaded: ${'error' in message ? message.error : 'no answer'}`));
        }
      });
    });
    return new SentenceEmbedder(thread, tokenizer, Object.keys(parsed.model.vocab).length, settings);
  }

  /** false once its thread has stopped: a new one must be loaded. */
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
      if (this.running) return;
      // An idle model starts after the current turn of the event loop: the requests its pool sends
      // together (as slots free up all at once when a run's answers come back) go in one run, not
      // a run of one followed by one of the rest.
      this.running = true;
      setImmediate(() => void this.drain());
    });
  }

  /** Runs of the model so far (a run holds every request queued when it began, up to the batch size). */
  get runs(): number {
    return this.runCount;
  }

  async close(): Promise<void> {
    this.fail(new Error('the embedding model was closed'));
    await this.thread.terminate();
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const run of this.runs_.values()) run.reject(error);
    this.runs_.clear();
    for (const pending of this.queue.splice(0)) pending.reject(error);
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        // Whole requests, in arrival order, up to the batch size (a request larger than it runs alone).
        const taken: Pending[] = [this.queue.shift()!];
        let count = taken[0]!.inputs.length;
        while (this.queue.length > 0 && count + this.queue[0]!.inputs.length <= this.maxBatchInputs) {
          count += this.queue[0]!.inputs.length;
          taken.push(this.queue.shift()!);
        }
        try {
          const embedded = await this.run(
            taken.flatMap((pending) => pending.inputs),
            taken.flatMap((pending) => pending.inputs.map(() => pending.format)),
          );
          let at = 0;
          for (const pending of taken) {
            const end = at + pending.inputs.length;
            pending.resolve({ vectors: embedded.vectors.slice(at, end), texts: embedded.texts.slice(at, end) });
            at = end;
          }
        } catch (error) {
          for (const pending of taken) pending.reject(error);
        }
      }
    } finally {
      this.running = false;
    }
  }

  /** Runs of at most maxBatchInputs on the model's thread, each padded to its longest input. */
  private async run(inputs: readonly TokenIds[], formats: ReadonlyArray<VectorFormat | null>): Promise<Embedded> {
    const vectors: Float32Array[] = [];
    const texts: Array<string | null> = [];
    for (let start = 0; start < inputs.length; start += this.maxBatchInputs) {
      const rows = inputs.slice(start, start + this.maxBatchInputs);
      this.runCount += 1;
      const id = this.nextRun++;
      const part = await new Promise<Embedded>((resolve, reject) => {
        if (this.failure) return reject(this.failure);
        this.runs_.set(id, { resolve, reject });
        this.thread.postMessage({ id, rows, formats: formats.slice(start, start + this.maxBatchInputs) });
      });
      vectors.push(...part.vectors);
      texts.push(...part.texts);
    }
    return { vectors, texts };
  }
}
