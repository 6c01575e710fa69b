// Embeddings of text for the simulator: deterministic (the same text always gives the same vector),
// unit length, of an all-MiniLM-L6-v2's 384 dimensions. They carry no meaning; what matters to a
// benchmark is their size and shape on the wire.
import { createHash } from 'node:crypto';

export const EMBEDDING_DIMENSIONS = 384;

/** A unit vector drawn from a generator seeded by the text's sha256. */
export function embeddingOf(text: string): number[] {
  const digest = createHash('sha256').update(text).digest();
  let state = digest.readUInt32LE(0);
  // mulberry32: uniform in [0, 1), enough for coordinates nobody reads for meaning.
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const vector = Array.from({ length: EMBEDDING_DIMENSIONS }, () => next() * 2 - 1);
  const norm = Math.hypot(...vector);
  return vector.map((value) => value / norm);
}

/** OpenAI's `encoding_format: "base64"`: the vector as little-endian float32, base64-encoded. */
export function base64Of(vector: readonly number[]): string {
  const view = new DataView(new ArrayBuffer(vector.length * 4));
  vector.forEach((value, index) => view.setFloat32(index * 4, value, true));
  return Buffer.from(view.buffer).toString('base64');
}
