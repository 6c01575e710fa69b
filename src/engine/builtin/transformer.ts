// A small decoder-only transformer (Llama layout: RMSNorm, rotary attention, SwiGLU MLP) over a
// byte-level vocabulary, on the CPU, in plain float32 arithmetic.
import { BOS, EOS, type LoadedWeights, type ModelConfig } from './checkpoint.js';

interface Layer {
  inputNorm: Float32Array;
  postNorm: Float32Array;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  o: Float32Array;
  gate: Float32Array;
  up: Float32Array;
  down: Float32Array;
}

/** y = W x for a row-major W of shape [rows, columns]. */
function matvec(weights: Float32Array, x: Float32Array, rows: number, columns: number, out: Float32Array): Float32Array {
  for (let row = 0; row < rows; row++) {
    let sum = 0;
    const base = row * columns;
    for (let column = 0; column < columns; column++) sum += weights[base + column]! * x[column]!;
    out[row] = sum;
  }
  return out;
}

function rmsNorm(x: Float32Array, weight: Float32Array, eps: number, out: Float32Array): Float32Array {
  let sum = 0;
  for (let index = 0; index < x.length; index++) sum += x[index]! * x[index]!;
  const scale = 1 / Math.sqrt(sum / x.length + eps);
  for (let index = 0; index < x.length; index++) out[index] = x[index]! * scale * weight[index]!;
  return out;
}

/** The per-request state of a forward pass: the keys and values of every position so far. */
export class Session {
  readonly keys: Float32Array[][];
  readonly values: Float32Array[][];
  position = 0;
  /** Final hidden state (after the last norm) of each position: embeddings pool them. */
  readonly hidden: Float32Array[] = [];

  constructor(layers: number, readonly keepHidden: boolean) {
    this.keys = Array.from({ length: layers }, () => []);
    this.values = Array.from({ length: layers }, () => []);
  }
}

export class Transformer {
  readonly config: ModelConfig;
  readonly manifest: LoadedWeights['manifest'];
  private readonly embed: Float32Array;
  private readonly layers: Layer[];
  private readonly finalNorm: Float32Array;
  private readonly lmHead: Float32Array;
  private readonly headSize: number;
  private readonly inverseFrequencies: Float32Array;

  constructor(weights: LoadedWeights) {
    this.config = weights.config;
    this.manifest = weights.manifest;
    const tensor = (name: string) => {
      const found = weights.tensors.get(name);
      if (!found) throw new Error(`tensor ${name} is missing`);
      return found;
    };
    this.embed = tensor('model.embed_tokens.weight');
    this.layers = Array.from({ length: this.config.num_hidden_layers }, (_, index) => {
      const prefix = `model.layers.${index}`;
      return {
        inputNorm: tensor(`${prefix}.input_layernorm.weight`),
        postNorm: tensor(`${prefix}.post_attention_layernorm.weight`),
        q: tensor(`${prefix}.self_attn.q_proj.weight`),
        k: tensor(`${prefix}.self_attn.k_proj.weight`),
        v: tensor(`${prefix}.self_attn.v_proj.weight`),
        o: tensor(`${prefix}.self_attn.o_proj.weight`),
        gate: tensor(`${prefix}.mlp.gate_proj.weight`),
        up: tensor(`${prefix}.mlp.up_proj.weight`),
        down: tensor(`${prefix}.mlp.down_proj.weight`),
      };
    });
    this.finalNorm = tensor('model.norm.weight');
    this.lmHead = tensor('lm_head.weight');
    this.headSize = this.config.hidden_size / this.config.num_attention_heads;
    this.inverseFrequencies = new Float32Array(this.headSize / 2).map((_, index) => 1 / this.config.rope_theta ** ((2 * index) / this.headSize));
  }

  newSession(keepHidden = false): Session {
    return new Session(this.layers.length, keepHidden);
  }

  private rotate(vector: Float32Array, position: number): void {
    const half = this.headSize / 2;
    for (let head = 0; head < this.config.num_attention_heads; head++) {
      const base = head * this.headSize;
      for (let index = 0; index < half; index++) {
        const angle = position * this.inverseFrequencies[index]!;
        const cos = Math.cos(angle);
        const sin = Math.sin(angle);
        const a = vector[base + index]!;
        const b = vector[base + index + half]!;
        vector[base + index] = a * cos - b * sin;
        vector[base + index + half] = a * sin + b * cos;
      }
    }
  }

  /** Feeds one token; returns the logits for the next one. */
  step(session: Session, token: number): Float32Array {
    const { hidden_size: h, intermediate_size: inter, rms_norm_eps: eps, num_attention_heads: heads, vocab_size: vocab } = this.config;
    if (session.position >= this.config.max_position_embeddings) throw new Error('context window exceeded');
    const x = this.embed.slice(token * h, (token + 1) * h);
    const normed = new Float32Array(h);
    const attention = new Float32Array(h);
    const projected = new Float32Array(h);
    const gate = new Float32Array(inter);
    const up = new Float32Array(inter);
    const scale = 1 / Math.sqrt(this.headSize);
    this.layers.forEach((layer, index) => {
      rmsNorm(x, layer.inputNorm, eps, normed);
      const q = matvec(layer.q, normed, h, h, new Float32Array(h));
      const k = matvec(layer.k, normed, h, h, new Float32Array(h));
      const v = matvec(layer.v, normed, h, h, new Float32Array(h));
      this.rotate(q, session.position);
      this.rotate(k, session.position);
      const keys = session.keys[index]!;
      const values = session.values[index]!;
      keys.push(k);
      values.push(v);
      const scores = new Float32Array(keys.length);
      for (let head = 0; head < heads; head++) {
        const base = head * this.headSize;
        let max = -Infinity;
        for (let at = 0; at < keys.length; at++) {
          let dot = 0;
          const key = keys[at]!;
          for (let d = 0; d < this.headSize; d++) dot += q[base + d]! * key[base + d]!;
          scores[at] = dot * scale;
          if (scores[at]! > max) max = scores[at]!;
        }
        let total = 0;
        for (let at = 0; at < keys.length; at++) {
          scores[at] = Math.exp(scores[at]! - max);
          total += scores[at]!;
        }
        for (let d = 0; d < this.headSize; d++) {
          let sum = 0;
          for (let at = 0; at < keys.length; at++) sum += scores[at]! * values[at]![base + d]!;
          attention[base + d] = sum / total;
        }
      }
      matvec(layer.o, attention, h, h, projected);
      for (let d = 0; d < h; d++) x[d] = x[d]! + projected[d]!;
      rmsNorm(x, layer.postNorm, eps, normed);
      matvec(layer.gate, normed, inter, h, gate);
      matvec(layer.up, normed, inter, h, up);
      for (let d = 0; d < inter; d++) {
        const g = gate[d]!;
        gate[d] = (g / (1 + Math.exp(-g))) * up[d]!;
      }
      matvec(layer.down, gate, h, inter, projected);
      for (let d = 0; d < h; d++) x[d] = x[d]! + projected[d]!;
    });
    session.position += 1;
    const final = rmsNorm(x, this.finalNorm, eps, new Float32Array(h));
    if (session.keepHidden) session.hidden.push(final);
    return matvec(this.lmHead, final, vocab, h, new Float32Array(vocab));
  }

  /** Mean of the final hidden states over the tokens, scaled to unit length. */
  embedding(tokens: readonly number[]): Float32Array {
    const session = this.newSession(true);
    for (const token of tokens) this.step(session, token);
    const pooled = new Float32Array(this.config.hidden_size);
    for (const state of session.hidden) for (let d = 0; d < pooled.length; d++) pooled[d] = pooled[d]! + state[d]! / session.hidden.length;
    let norm = 0;
    for (const value of pooled) norm += value * value;
    norm = Math.sqrt(norm) || 1;
    return pooled.map((value) => value / norm);
  }
}

/** Seeded sampling: the same seed and logits give the same token. */
export class Sampler {
  private state: number;

  constructor(seed: number, private readonly temperature: number) {
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  private uniform(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** The next token; with `allowed`, only among the tokens it allows (the others' logits are set to -Infinity). */
  next(logits: Float32Array, allowed?: (token: number) => boolean): number {
    logits[BOS] = -Infinity; // never generated
    if (allowed) for (let token = 0; token < logits.length; token++) if (!allowed(token)) logits[token] = -Infinity;
    if (this.temperature <= 0) {
      let best = 0;
      for (let index = 1; index < logits.length; index++) if (logits[index]! > logits[best]!) best = index;
      return best;
    }
    let max = -Infinity;
    for (const value of logits) if (value > max) max = value;
    const weights = new Float64Array(logits.length);
    let total = 0;
    for (let index = 0; index < logits.length; index++) {
      weights[index] = Math.exp((logits[index]! - max) / this.temperature);
      total += weights[index]!;
    }
    let target = this.uniform() * total;
    let last = EOS;
    for (let index = 0; index < weights.length; index++) {
      if (weights[index] === 0) continue;
      last = index;
      target -= weights[index]!;
      if (target <= 0) return index;
    }
    return last; // rounding left a sliver of the total: the last token that had any weight
  }

}
