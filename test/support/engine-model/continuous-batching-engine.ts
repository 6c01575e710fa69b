// A continuous-batching inference engine, modelled step by step as vLLM's V1 scheduler runs one,
// with no I/O: the time it runs on is handed in (test/support/engine-model/engine-clock.ts), so the simulator runs it
// on the process's clock and tests on simulated time.
//
// Each step runs the sequences of the running batch together and takes
//   step + sequence × sequences + prefill-token × prompt tokens + decode-token × decoded tokens
// (test/support/engine-model/engine-config.ts, divided by the speed). A step first gives each running sequence its
// next tokens (one to decode, or the next chunk of its prompt), then admits waiting requests while
// the batch has room: at most max_num_seqs sequences and max_num_batched_tokens tokens a step
// (prompts are chunked to fit, vLLM's chunked prefill). The KV cache holds each sequence's
// computed tokens (prompt and generated so far) in blocks of 16: a waiting request whose chunk does
// not fit stays waiting, and a running sequence that cannot grow preempts the newest one (the one
// of the largest priority value under the priority policy), which loses its KV and goes back to
// waiting to recompute its prompt and what it had generated, as vLLM V1 does. Under the priority
// policy a waiting request with a strictly lower priority value than a running one, finding no
// room, preempts it. A step that had to preempt admits nothing new.
//
// Calibration (the defaults in test/support/engine-model/engine-config.ts), against a published vLLM sweep:
// "vLLM throughput-latency sweep on NVIDIA A100" (johnmusgrave.com): Llama-3.1-8B-Instruct, bf16,
// one A100 40GB, vLLM 0.23.0 with its default scheduling, `vllm bench serve` with random prompts of
// 1,024 tokens and 128 output tokens (--ignore-eos), --max-concurrency 1 to 64: decode of one
// request runs at about 75 tokens/s (13.3 ms a token), and concurrency 8 gives 6.6 times the output
// throughput of concurrency 1 "with almost no latency cost". The step's 13.2 ms is the weights
// (15 GiB) read at about 77% of the A100's bandwidth, as that sweep found; a decoding sequence's
// 100 µs (80 for the sequence, 20 for its token) is its KV of about 1,100 tokens (128 KiB each)
// read at that bandwidth. The prompt token's 60 µs is not in the source: with it a step computing
// a 1,024-token prompt takes about 75 ms, Llama-3.1-8B's 16 GFLOP a token at about 70% of the
// A100's 312 TFLOPS. So calibrated, the model decodes one request at 75.2 tokens/s and gives 6.2
// times the throughput at concurrency 8 (bench/FINDINGS.md, 2026-11-28); test/engine-model.test.ts
// holds it within 20% of both figures.
import { type EngineClock, stepStart } from './engine-clock.js';
import { type EngineConfig, stepMs } from './engine-config.js';
import { type Ordered, insertInOrder, lastInOrder } from './waiting-order.js';

/** Tokens in a KV-cache block (vLLM's default block size). */
export const KV_BLOCK_TOKENS = 16;

export interface SequenceRequest {
  readonly promptTokens: number;
  readonly maxTokens: number;
  /** vLLM's priority field (absent: 0); only the priority policy reads it. */
  readonly priority?: number;
  /** The sequence joined the running batch for the first time. */
  readonly onStart?: () => void;
  /** A step produced the sequence's next token; `index` counts from 0. */
  readonly onToken?: (index: number) => void;
  /** The last token was produced and the sequence left the batch. */
  readonly onFinish?: () => void;
}

/** One step, as scheduled. */
export interface StepRecord {
  readonly startedAt: number;
  readonly durationMs: number;
  readonly sequences: number;
  readonly prefillTokens: number;
  readonly decodeTokens: number;
  /** The engine's gauges once the step was scheduled. */
  readonly running: number;
  readonly waiting: number;
  readonly kvUsage: number;
  /** Ids of the sequences the step runs. */
  readonly ids: readonly number[];
}

export interface EngineLoad {
  readonly running: number;
  readonly waiting: number;
  /** Blocks of the KV cache in use, 0–1. */
  readonly kvUsage: number;
}

class Sequence implements Ordered {
  state: 'waiting' | 'running' | 'done' = 'waiting';
  /** Tokens whose KV is computed. */
  computed = 0;
  generated = 0;
  blocks = 0;
  started = false;
  readonly priority: number;

  constructor(
    readonly id: number,
    readonly arrival: number,
    readonly request: SequenceRequest,
  ) {
    this.priority = request.priority ?? 0;
  }

  /** Prompt and generated tokens: what the model has seen. */
  get known(): number {
    return this.request.promptTokens + this.generated;
  }
}

export class ContinuousBatchingEngine {
  /** Totals since start, for /metrics and /stats. */
  readonly counters = { steps: 0, sequenceSteps: 0, busyMs: 0, preemptions: 0, promptTokens: 0, generationTokens: 0, finished: 0 };
  /** Called as each step is scheduled. */
  onStep: ((step: StepRecord) => void) | undefined;
  private readonly waiting: Sequence[] = [];
  /** In admission order: the last one was admitted most recently. */
  private readonly running: Sequence[] = [];
  private readonly sequences = new Map<number, Sequence>();
  private readonly totalBlocks: number;
  private usedBlocks = 0;
  private arrivals = 0;
  /** A step is scheduled or under way. */
  private stepping = false;
  private lastStepEnd = Number.NEGATIVE_INFINITY;

  constructor(
    readonly config: EngineConfig,
    private readonly clock: EngineClock,
  ) {
    this.totalBlocks = Math.floor(config.kvCacheTokens / KV_BLOCK_TOKENS);
  }

  /** Why a request could never run here, or undefined: its whole sequence must fit the KV cache. */
  refusal(promptTokens: number, maxTokens: number): string | undefined {
    const blocks = Math.ceil((promptTokens + maxTokens) / KV_BLOCK_TOKENS);
    if (blocks <= this.totalBlocks) return undefined;
    return `This model's KV cache holds ${this.totalBlocks * KV_BLOCK_TOKENS} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the messages, ${maxTokens} in the completion).`;
  }

  /** Queues a request; answers its id. Throws when `refusal` has a reason. */
  submit(request: SequenceRequest): number {
    const reason = this.refusal(request.promptTokens, request.maxTokens);
    if (reason) throw new Error(reason);
    const sequence = new Sequence(this.arrivals, this.arrivals++, request);
    this.sequences.set(sequence.id, sequence);
    insertInOrder(this.config.policy, this.waiting, sequence);
    this.wake();
    return sequence.id;
  }

  /** Drops a request whose client has gone, wherever it is; its KV is freed. */
  cancel(id: number): void {
    const sequence = this.sequences.get(id);
    if (!sequence) return;
    if (sequence.state === 'waiting') this.waiting.splice(this.waiting.indexOf(sequence), 1);
    else if (sequence.state === 'running') this.leave(sequence);
    this.sequences.delete(id);
    sequence.state = 'done';
  }

  get load(): EngineLoad {
    return { running: this.running.length, waiting: this.waiting.length, kvUsage: this.totalBlocks === 0 ? 0 : this.usedBlocks / this.totalBlocks };
  }

  private wake(): void {
    if (this.stepping) return;
    this.stepping = true;
    this.clock.after(0, () => this.step());
  }

  private step(): void {
    const now = this.clock.now;
    const startedAt = stepStart(now, this.lastStepEnd);
    let plan = this.schedule();
    // A step that preempted admits nothing; should it have preempted everything, the next one does.
    if (plan.batch.size === 0 && this.waiting.length > 0) plan = this.schedule();
    if (plan.batch.size === 0) {
      this.stepping = false;
      return;
    }
    const load = { sequences: plan.batch.size, prefillTokens: plan.prefillTokens, decodeTokens: plan.decodeTokens };
    const durationMs = stepMs(this.config, load);
    this.lastStepEnd = startedAt + durationMs;
    this.counters.steps += 1;
    this.counters.sequenceSteps += plan.batch.size;
    this.counters.busyMs += durationMs;
    this.onStep?.({ startedAt, durationMs, ...load, ...this.load, ids: [...plan.batch.keys()].map((sequence) => sequence.id) });
    for (const sequence of plan.starting) sequence.request.onStart?.();
    this.clock.after(this.lastStepEnd - now, () => {
      this.complete(plan.batch);
      if (this.running.length > 0 || this.waiting.length > 0) this.step();
      else this.stepping = false;
    });
  }

  /** The sequences this step runs and how many tokens each computes; preempts and admits on the way. */
  private schedule(): { batch: Map<Sequence, number>; starting: Sequence[]; prefillTokens: number; decodeTokens: number } {
    const { policy, maxNumSeqs } = this.config;
    const batch = new Map<Sequence, number>();
    const starting: Sequence[] = [];
    let budget = this.config.maxNumBatchedTokens;
    const preempt = (victim: Sequence) => {
      budget += batch.get(victim) ?? 0;
      batch.delete(victim);
      this.leave(victim);
      victim.computed = 0;
      victim.state = 'waiting';
      insertInOrder(policy, this.waiting, victim);
      this.counters.preemptions += 1;
    };
    let preempted = false;
    for (const sequence of [...this.running]) {
      if (budget === 0) break;
      if (sequence.state !== 'running') continue;
      const tokens = Math.min(sequence.known - sequence.computed, budget);
      while (this.blocksNeeded(sequence, tokens) > this.totalBlocks - this.usedBlocks) {
        preempt(policy === 'priority' ? lastInOrder(policy, this.running)! : this.running[this.running.length - 1]!);
        preempted = true;
        if (sequence.state !== 'running') break;
      }
      if (sequence.state !== 'running') continue;
      this.allocate(sequence, tokens);
      batch.set(sequence, tokens);
      budget -= tokens;
    }
    admitting: while (!preempted && budget > 0 && this.waiting.length > 0) {
      const sequence = this.waiting[0]!;
      const tokens = Math.min(sequence.known - sequence.computed, budget);
      while (this.running.length >= maxNumSeqs || this.blocksNeeded(sequence, tokens) > this.totalBlocks - this.usedBlocks) {
        const victim = policy === 'priority' ? lastInOrder(policy, this.running) : undefined;
        if (!victim || victim.priority <= sequence.priority) break admitting;
        preempt(victim);
      }
      this.waiting.shift();
      sequence.state = 'running';
      this.running.push(sequence);
      this.allocate(sequence, tokens);
      batch.set(sequence, tokens);
      budget -= tokens;
      if (!sequence.started) {
        sequence.started = true;
        starting.push(sequence);
      }
    }
    let prefillTokens = 0;
    let decodeTokens = 0;
    for (const [sequence, tokens] of batch) {
      if (tokens === 1 && sequence.generated > 0 && sequence.computed === sequence.known - 1) decodeTokens += 1;
      else prefillTokens += tokens;
    }
    return { batch, starting, prefillTokens, decodeTokens };
  }

  /** The step's tokens are computed: a sequence whose known tokens are all computed samples its next one. */
  private complete(batch: Map<Sequence, number>): void {
    for (const [sequence, tokens] of batch) {
      if (sequence.state !== 'running') continue;
      sequence.computed += tokens;
      if (sequence.computed < sequence.known) continue;
      if (sequence.generated === 0) this.counters.promptTokens += sequence.request.promptTokens;
      sequence.generated += 1;
      this.counters.generationTokens += 1;
      sequence.request.onToken?.(sequence.generated - 1);
      if (sequence.generated < sequence.request.maxTokens) continue;
      this.leave(sequence);
      this.sequences.delete(sequence.id);
      sequence.state = 'done';
      this.counters.finished += 1;
      sequence.request.onFinish?.();
    }
  }

  private blocksNeeded(sequence: Sequence, tokens: number): number {
    return Math.max(0, Math.ceil((sequence.computed + tokens) / KV_BLOCK_TOKENS) - sequence.blocks);
  }

  private allocate(sequence: Sequence, tokens: number): void {
    const blocks = this.blocksNeeded(sequence, tokens);
    sequence.blocks += blocks;
    this.usedBlocks += blocks;
  }

  /** Takes a sequence out of the running batch and frees its KV. */
  private leave(sequence: Sequence): void {
    this.running.splice(this.running.indexOf(sequence), 1);
    this.usedBlocks -= sequence.blocks;
    sequence.blocks = 0;
  }
}
