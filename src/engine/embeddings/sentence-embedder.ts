import { readFile } from 'node:fs/promises';
import type { InferenceSession, Tensor } from 'onnxruntime-node';
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

interface Pending {
  readonly inputs: readonly TokenIds[];
  resolve(vectors: Float32Array[]): void;
  reject(error: unknown): void;
}

export interface SentenceEmbedderSettings {
  /** Most inputs in one run of the model: what has queued meanwhile goes together, up to this. */
  readonly maxBatchInputs?: number;
  /** onnxruntime's threads for one run; default: its own (the machine's cores). */
  readonly threads?: number;
}

/**
 * all-MiniLM-L6-v2 on onnxruntime's CPU provider: mean pooling over the attention mask, then L2
 * normalisation, as the model was trained to be used. The model runs off the main event loop
 * (onnxruntime runs each `run` on a thread of its own and resolves when done); while one run is
 * under way the inputs of every request that arrives queue, and the next run takes them together,
 * so concurrent requests share runs as a batching server's do.
 */
export class SentenceEmbedder {
  private readonly queue: Pending[] = [];
  private running = false;
  private runCount = 0;
  private readonly maxBatchInputs: number;
  private readonly clsId: number;
  private readonly sepId: number;

  private constructor(
    private readonly session: InferenceSession,
    private readonly tokenizer: { encode(text: string): { ids: number[] } },
    private readonly tensor: typeof Tensor,
    readonly vocabularySize: number,
    settings: SentenceEmbedderSettings,
  ) {
    this.maxBatchInputs = settings.maxBatchInputs ?? 64;
    const ids = tokenizer.encode('');
    this.clsId = ids.ids[0]!;
    this.sepId = ids.ids[ids.ids.length - 1]!;
  }

  /** Loads the model; onnxruntime and the tokenizer are imported only here, by a process that serves it. */
  static async load(files: MiniLmFiles, settings: SentenceEmbedderSettings = {}): Promise<SentenceEmbedder> {
    const [ort, { Tokenizer }, tokenizerJson] = await Promise.all([import('onnxruntime-node'), import('@huggingface/tokenizers'), readFile(files.tokenizer, 'utf8')]);
    const parsed = JSON.parse(tokenizerJson) as { model: { vocab: Record<string, number> } };
    const tokenizer = new Tokenizer(parsed, TOKENIZER_CONFIG);
    const session = await ort.InferenceSession.create(files.model, {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      ...(settings.threads ? { intraOpNumThreads: settings.threads } : {}),
    });
    return new SentenceEmbedder(session, tokenizer, ort.Tensor, Object.keys(parsed.model.vocab).length, settings);
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
  embed(inputs: readonly TokenIds[]): Promise<Float32Array[]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ inputs, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  /** Runs of the model so far (a run holds every request queued when it began, up to the batch size). */
  get runs(): number {
    return this.runCount;
  }

  async close(): Promise<void> {
    await this.session.release();
  }

  private async drain(): Promise<void> {
    this.running = true;
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
          const vectors = await this.run(taken.flatMap((pending) => pending.inputs));
          let at = 0;
          for (const pending of taken) {
            pending.resolve(vectors.slice(at, at + pending.inputs.length));
            at += pending.inputs.length;
          }
        } catch (error) {
          for (const pending of taken) pending.reject(error);
        }
      }
    } finally {
      this.running = false;
    }
  }

  /** One run of the model over inputs padded to the longest of them, in runs of at most maxBatchInputs. */
  private async run(inputs: readonly TokenIds[]): Promise<Float32Array[]> {
    const vectors: Float32Array[] = [];
    for (let start = 0; start < inputs.length; start += this.maxBatchInputs) {
      const part = inputs.slice(start, start + this.maxBatchInputs);
      const batch = part.length;
      const length = Math.max(...part.map((ids) => ids.length));
      const ids = new BigInt64Array(batch * length);
      const mask = new BigInt64Array(batch * length);
      part.forEach((input, row) => {
        input.forEach((id, column) => {
          ids[row * length + column] = BigInt(id);
          mask[row * length + column] = 1n;
        });
      });
      const shape = [batch, length];
      const feeds: Record<string, Tensor> = {
        input_ids: new this.tensor('int64', ids, shape),
        attention_mask: new this.tensor('int64', mask, shape),
      };
      if (this.session.inputNames.includes('token_type_ids')) feeds.token_type_ids = new this.tensor('int64', new BigInt64Array(batch * length), shape);
      this.runCount += 1;
      const output = (await this.session.run(feeds))[this.session.outputNames[0]!]!;
      const hidden = output.data as Float32Array;
      const width = output.dims[2]!;
      for (let row = 0; row < batch; row++) vectors.push(meanPooledUnit(hidden, row, part[row]!.length, length, width));
    }
    return vectors;
  }
}

/** The mean of a row's token states over its real tokens (padding is at the end), scaled to length 1. */
function meanPooledUnit(hidden: Float32Array, row: number, tokens: number, length: number, width: number): Float32Array {
  const vector = new Float32Array(width);
  for (let token = 0; token < tokens; token++) {
    const offset = (row * length + token) * width;
    for (let index = 0; index < width; index++) vector[index]! += hidden[offset + index]!;
  }
  let norm = 0;
  for (let index = 0; index < width; index++) {
    vector[index]! /= tokens;
    norm += vector[index]! * vector[index]!;
  }
  norm = Math.sqrt(norm) || 1;
  for (let index = 0; index < width; index++) vector[index]! /= norm;
  return vector;
}
