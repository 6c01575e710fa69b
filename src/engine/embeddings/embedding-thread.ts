// One of the built-in embedding model's threads: onnxruntime-node runs a session synchronously on
// the thread that calls it (its `run` only defers to the next turn of the loop), so the model runs
// here, off the main event loop, which meanwhile serves HTTP and records the batch's lines. Each
// thread has a session of its own and is given one run at a time (sentence-embedder.ts).
// Message in: { rows, formats } (token ids, each row framed by [CLS] and [SEP]; for each row,
// 'float' or 'base64' to have its vector written here as OpenAI's JSON gives it, or null); out:
// { vectors, width, texts } (rows × width floats, mean-pooled over each row's tokens and scaled to
// length 1, transferred; each asked-for row's JSON: an array of numbers or a base64 string), or
// { error }. The first message out is { ready: true } or { error } when the model cannot load.
import { parentPort, workerData } from 'node:worker_threads';

interface ThreadSettings {
  readonly model: string;
  /** onnxruntime's threads for this session's runs. */
  readonly threads: number;
}

const settings = workerData as ThreadSettings;
/** all-MiniLM-L6-v2's vectors. */
const DIMENSIONS = 384;
/**
 * Inputs of a run given to one session run, shortest first (see below). On 2 cores a session run
 * of 16 costs about what one of 64 does per input, and parts of a sorted run pad less (the
 * benchmark's rounds spread too widely to show by how much: bench/FINDINGS.md, real models).
 */
const PART_ROWS = 16;
const port = parentPort!;

try {
  const ort = (await import('onnxruntime-node')).default;
  const session = await ort.InferenceSession.create(settings.model, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: settings.threads,
    // Where a session has threads of its own, they sleep between operators rather than spin: the
    // cores are shared with the main loop and the other model threads (spinning cost a fifth more
    // CPU per sentence on 2 cores for no more sentences a second: bench/FINDINGS.md).
    extra: { session: { intra_op: { allow_spinning: '0' } } },
  });
  const withTypes = session.inputNames.includes('token_type_ids');

  /**
   * One session run over `rows` (indexes into `all`), each padded to the longest of them; their
   * pooled vectors written at their own places in `into`.
   */
  const runPart = async (all: number[][], rows: number[], into: Float32Array, width: number) => {
    const batch = rows.length;
    const length = Math.max(...rows.map((row) => all[row]!.length));
    const ids = new BigInt64Array(batch * length);
    const mask = new BigInt64Array(batch * length);
    for (let at = 0; at < batch; at++) {
      const tokens = all[rows[at]!]!;
      for (let column = 0; column < tokens.length; column++) {
        ids[at * length + column] = BigInt(tokens[column]!);
        mask[at * length + column] = 1n;
      }
    }
    const shape = [batch, length];
    const feeds: Record<string, InstanceType<typeof ort.Tensor>> = { input_ids: new ort.Tensor('int64', ids, shape), attention_mask: new ort.Tensor('int64', mask, shape) };
    if (withTypes) feeds.token_type_ids = new ort.Tensor('int64', new BigInt64Array(batch * length), shape);
    const output = (await session.run(feeds))[session.outputNames[0]!]!;
    const hidden = output.data as Float32Array;
    if (output.dims[2] !== width) throw new Error(`the model answered ${output.dims[2]} dimensions, not ${width}`);
    for (let at = 0; at < batch; at++) meanPooledUnit(hidden, at, all[rows[at]!]!.length, length, width, into, rows[at]!);
  };

  port.on('message', async (message: { rows: number[][]; formats: Array<'float' | 'base64' | null> }) => {
    try {
      const { rows } = message;
      const width = DIMENSIONS;
      const vectors = new Float32Array(rows.length * width);
      // Shortest first, in parts of PART_ROWS: each part is padded only to its own longest input,
      // not the whole run to the longest of all (a corpus's sentences vary several times in length).
      const order = rows.map((_, index) => index).sort((a, b) => rows[a]!.length - rows[b]!.length);
      for (let at = 0; at < order.length; at += PART_ROWS) await runPart(rows, order.slice(at, at + PART_ROWS), vectors, width);
      // Written here rather than on the main loop: 384 numbers a line, each turned into its shortest
      // text (a float32 widened to a double, as JSON.stringify of the floats would write it).
      const texts = message.formats.map((format, row) => {
        if (!format) return null;
        const vector = vectors.subarray(row * width, (row + 1) * width);
        return format === 'base64' ? `"${Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64')}"` : `[${vector.join(',')}]`;
      });
      port.postMessage({ vectors, width, texts }, [vectors.buffer]);
    } catch (error) {
      port.postMessage({ error: error instanceof Error ? error.message : String(error) });
    }
  });
  port.postMessage({ ready: true });
} catch (error) {
  port.postMessage({ error: error instanceof Error ? error.message : String(error) });
}

/** The mean of a row's token states over its real tokens (padding is at the end), scaled to length 1, into `into` at row `place`. */
function meanPooledUnit(hidden: Float32Array, row: number, tokens: number, length: number, width: number, into: Float32Array, place: number): void {
  const at = place * width;
  for (let token = 0; token < tokens; token++) {
    const offset = (row * length + token) * width;
    for (let index = 0; index < width; index++) into[at + index]! += hidden[offset + index]!;
  }
  let norm = 0;
  for (let index = 0; index < width; index++) {
    into[at + index]! /= tokens;
    norm += into[at + index]! * into[at + index]!;
  }
  norm = Math.sqrt(norm) || 1;
  for (let index = 0; index < width; index++) into[at + index]! /= norm;
}
