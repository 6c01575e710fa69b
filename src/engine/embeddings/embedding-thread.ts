// The built-in embedding model's thread: onnxruntime-node runs a session synchronously on the
// thread that calls it (its `run` only defers to the next turn of the loop), so the model runs
// here, off the main event loop, which meanwhile serves HTTP and records the batch's lines.
// Message in: { id, rows, formats } (token ids, each row framed by [CLS] and [SEP]; for each row,
// 'float' or 'base64' to have its vector written here as OpenAI's JSON gives it, or null); out:
// { id, vectors, texts } (rows × width floats, mean-pooled over each row's tokens and scaled to
// length 1, transferred; each asked-for row's JSON: an array of numbers or a base64 string), or
// { id, error }. The first message out is { ready: true } or { error } when the model cannot load.
import { parentPort, workerData } from 'node:worker_threads';

interface ThreadSettings {
  readonly model: string;
  readonly threads?: number;
}

const settings = workerData as ThreadSettings;
const port = parentPort!;

try {
  const ort = (await import('onnxruntime-node')).default;
  const session = await ort.InferenceSession.create(settings.model, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    ...(settings.threads ? { intraOpNumThreads: settings.threads } : {}),
  });
  const withTypes = session.inputNames.includes('token_type_ids');

  port.on('message', async (message: { id: number; rows: number[][]; formats: Array<'float' | 'base64' | null> }) => {
    try {
      const { rows } = message;
      const batch = rows.length;
      const length = Math.max(...rows.map((row) => row.length));
      const ids = new BigInt64Array(batch * length);
      const mask = new BigInt64Array(batch * length);
      for (let row = 0; row < batch; row++) {
        const tokens = rows[row]!;
        for (let column = 0; column < tokens.length; column++) {
          ids[row * length + column] = BigInt(tokens[column]!);
          mask[row * length + column] = 1n;
        }
      }
      const shape = [batch, length];
      const feeds: Record<string, InstanceType<typeof ort.Tensor>> = { input_ids: new ort.Tensor('int64', ids, shape), attention_mask: new ort.Tensor('int64', mask, shape) };
      if (withTypes) feeds.token_type_ids = new ort.Tensor('int64', new BigInt64Array(batch * length), shape);
      const output = (await session.run(feeds))[session.outputNames[0]!]!;
      const hidden = output.data as Float32Array;
      const width = output.dims[2]!;
      const vectors = new Float32Array(batch * width);
      for (let row = 0; row < batch; row++) meanPooledUnit(hidden, vectors, row, rows[row]!.length, length, width);
      // Written here rather than on the main loop: 384 numbers a line, each turned into its shortest
      // text (a float32 widened to a double, as JSON.stringify of the floats would write it).
      const texts = message.formats.map((format, row) => {
        if (!format) return null;
        const vector = vectors.subarray(row * width, (row + 1) * width);
        return format === 'base64' ? `"${Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64')}"` : `[${vector.join(',')}]`;
      });
      port.postMessage({ id: message.id, vectors, width, texts }, [vectors.buffer]);
    } catch (error) {
      port.postMessage({ id: message.id, error: error instanceof Error ? error.message : String(error) });
    }
  });
  port.postMessage({ ready: true });
} catch (error) {
  port.postMessage({ error: error instanceof Error ? error.message : String(error) });
}

/** The mean of a row's token states over its real tokens (padding is at the end), scaled to length 1, into `into`. */
function meanPooledUnit(hidden: Float32Array, into: Float32Array, row: number, tokens: number, length: number, width: number): void {
  const at = row * width;
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
