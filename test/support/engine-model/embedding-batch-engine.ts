// An embedding engine (an encoder such as BERT), modelled step by step with no I/O, on the time it
// is handed (test/support/engine-model/engine-clock.ts). Each input is one sequence computed whole in one step, as a
// pooling model runs in vLLM: a step takes waiting inputs in the policy's order while it holds
// fewer than max_num_seqs and their tokens fit max_num_batched_tokens (an input longer than that
// runs alone), and takes
//   step + sequence × inputs + prefill-token × tokens
// (test/support/engine-model/engine-config.ts, divided by the speed). Nothing stays between steps: an encoder keeps
// no KV cache.
//
// Calibration (the defaults in test/support/engine-model/engine-config.ts), loosely, to all-MiniLM-L6-v2 (6 layers,
// 384 dimensions): the Sentence-Transformers documentation's table of pretrained models gives it
// 14,200 sentences/s encoded on one GPU. With sentences of about 24 tokens and the library's
// default batch of 32, a step of 0.5 ms plus 2.3 µs a token gives 14,100 sentences/s, and full
// batches of 256 (max_num_seqs) about 17,500.
import { type EngineClock, stepStart } from './engine-clock.js';
import { type EngineConfig, stepMs } from './engine-config.js';
import type { EngineLoad, StepRecord } from './continuous-batching-engine.js';
import { type Ordered, insertInOrder } from './waiting-order.js';

export interface EmbeddingInput {
  readonly tokens: number;
  readonly priority?: number;
  /** The step computing this input has started. */
  readonly onStart?: () => void;
  /** The input's embedding is computed. */
  readonly onDone?: () => void;
}

interface Queued extends Ordered {
  readonly id: number;
  readonly input: EmbeddingInput;
}

export class EmbeddingBatchEngine {
  readonly counters = { steps: 0, sequenceSteps: 0, busyMs: 0, promptTokens: 0, finished: 0 };
  onStep: ((step: StepRecord) => void) | undefined;
  private readonly waiting: Queued[] = [];
  private inStep = 0;
  private arrivals = 0;
  private stepping = false;
  private lastStepEnd = Number.NEGATIVE_INFINITY;
  private readonly cancelled = new Set<number>();

  constructor(
    readonly config: EngineConfig,
    private readonly clock: EngineClock,
  ) {}

  /** Queues one input; answers its id. */
  submit(input: EmbeddingInput): number {
    const queued = { id: this.arrivals, arrival: this.arrivals++, priority: input.priority ?? 0, input };
    insertInOrder(this.config.policy, this.waiting, queued);
    if (!this.stepping) {
      this.stepping = true;
      this.clock.after(0, () => this.step());
    }
    return queued.id;
  }

  /** Drops an input whose client has gone: a waiting one leaves the queue, a computing one is not answered. */
  cancel(id: number): void {
    const index = this.waiting.findIndex((queued) => queued.id === id);
    if (index >= 0) this.waiting.splice(index, 1);
    else this.cancelled.add(id);
  }

  get load(): EngineLoad {
    return { running: this.inStep, waiting: this.waiting.length, kvUsage: 0 };
  }

  private step(): void {
    const now = this.clock.now;
    const startedAt = stepStart(now, this.lastStepEnd);
    const batch: Queued[] = [];
    let tokens = 0;
    while (this.waiting.length > 0 && batch.length < this.config.maxNumSeqs) {
      const next = this.waiting[0]!;
      if (batch.length > 0 && tokens + next.input.tokens > this.config.maxNumBatchedTokens) break;
      batch.push(this.waiting.shift()!);
      tokens += next.input.tokens;
    }
    if (batch.length === 0) {
      this.stepping = false;
      return;
    }
    const durationMs = stepMs(this.config, { sequences: batch.length, prefillTokens: tokens, decodeTokens: 0 });
    this.lastStepEnd = startedAt + durationMs;
    this.inStep = batch.length;
    this.counters.steps += 1;
    this.counters.sequenceSteps += batch.length;
    this.counters.busyMs += durationMs;
    this.onStep?.({ startedAt, durationMs, sequences: batch.length, prefillTokens: tokens, decodeTokens: 0, ...this.load, ids: batch.map((queued) => queued.id) });
    for (const queued of batch) queued.input.onStart?.();
    this.clock.after(this.lastStepEnd - now, () => {
      this.inStep = 0;
      for (const queued of batch) {
        if (this.cancelled.delete(queued.id)) continue;
        this.counters.promptTokens += queued.input.tokens;
        this.counters.finished += 1;
        queued.input.onDone?.();
      }
      this.step();
    });
  }
}
