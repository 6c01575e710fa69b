// Engines in simulated time (DiscreteEvents), for deterministic runs of the concurrency limit:
// stand-ins for GPU inference servers, which cannot run here, with the behaviour that matters to
// the limit: how many requests they serve at once, how their latency and throughput move with it,
// and the gauges vLLM publishes (requests running, waiting, KV-cache usage).
import { DiscreteEvents, seededRandom } from './discrete-events.js';

export interface EngineGauges {
  running: number;
  waiting: number;
  kvUsage: number;
}

export interface SimulatedEngine {
  /** Takes a request; `done` is called when it is answered. */
  submit(done: () => void): void;
  gauges(): EngineGauges;
  /** Requests answered so far. */
  readonly answered: number;
}

/**
 * A fixed-latency engine of `slots` slots: every request takes `latencyMs` (± 2%) however many it
 * holds; the rest wait in arrival order, or with `urgent` ahead of the others (vLLM's priority
 * scheduling, without preemption).
 */
export function fixedLatencyEngine(sim: DiscreteEvents, options: { slots: number; latencyMs: number; seed?: number }): SimulatedEngine & { slots: number; submitUrgent(done: () => void): void } {
  const random = seededRandom(options.seed ?? 1);
  const queue: Array<{ done: () => void; urgent: boolean }> = [];
  let running = 0;
  const engine = {
    answered: 0,
    slots: options.slots,
    submit(done: () => void) {
      queue.push({ done, urgent: false });
      pump();
    },
    submitUrgent(done: () => void) {
      const firstOrdinary = queue.findIndex((item) => !item.urgent);
      queue.splice(firstOrdinary === -1 ? queue.length : firstOrdinary, 0, { done, urgent: true });
      pump();
    },
    gauges: () => ({ running, waiting: queue.length, kvUsage: running / engine.slots }),
  };
  const pump = () => {
    while (running < engine.slots && queue.length > 0) {
      const { done } = queue.shift()!;
      running += 1;
      sim.after(options.latencyMs * (0.98 + 0.04 * random()), () => {
        running -= 1;
        engine.answered += 1;
        done();
        pump();
      });
    }
  };
  return engine;
}

/**
 * A continuous-batching LLM engine: a step loop over the running sequences (at most `maxSeqs`),
 * each step costing `baseMs` + `perSeqMs` per running sequence + `prefillMsPerRequest` per
 * sequence admitted in it; a request runs `outputTokens` steps. Waiting requests are admitted at
 * the start of a step. Its latency rises with the batch, its throughput rises faster, until the
 * batch is full.
 */
export function continuousBatchingEngine(
  sim: DiscreteEvents,
  options: { maxSeqs: number; baseMs: number; perSeqMs: number; prefillMsPerRequest: number; outputTokens: number },
): SimulatedEngine {
  const waiting: Array<() => void> = [];
  let running: Array<{ left: number; done: () => void }> = [];
  let stepping = false;
  const engine = {
    answered: 0,
    submit(done: () => void) {
      waiting.push(done);
      if (!stepping) step();
    },
    // The KV cache holds the batch's tokens with room to spare, as an engine sized for its batch does.
    gauges: () => ({ running: running.length, waiting: waiting.length, kvUsage: (0.6 * running.length) / options.maxSeqs }),
  };
  const step = () => {
    let admitted = 0;
    while (running.length < options.maxSeqs && waiting.length > 0) {
      running.push({ left: options.outputTokens, done: waiting.shift()! });
      admitted += 1;
    }
    if (running.length === 0) {
      stepping = false;
      return;
    }
    stepping = true;
    sim.after(options.baseMs + options.perSeqMs * running.length + options.prefillMsPerRequest * admitted, () => {
      const finished: Array<() => void> = [];
      running = running.filter((sequence) => {
        sequence.left -= 1;
        if (sequence.left > 0) return true;
        finished.push(sequence.done);
        return false;
      });
      for (const done of finished) {
        engine.answered += 1;
        done();
      }
      step();
    });
  };
  return engine;
}

/**
 * An embeddings engine with dynamic batching: each step takes whatever waits (at most `maxBatch`)
 * and answers all of it at the step's end, the step costing `baseMs` + `perItemMs` per input.
 */
export function dynamicBatchingEngine(sim: DiscreteEvents, options: { maxBatch: number; baseMs: number; perItemMs: number }): SimulatedEngine {
  const waiting: Array<() => void> = [];
  let running: Array<() => void> = [];
  const engine = {
    answered: 0,
    submit(done: () => void) {
      waiting.push(done);
      if (running.length === 0) step();
    },
    gauges: () => ({ running: running.length, waiting: waiting.length, kvUsage: 0 }),
  };
  const step = () => {
    running = waiting.splice(0, options.maxBatch);
    if (running.length === 0) return;
    sim.after(options.baseMs + options.perItemMs * running.length, () => {
      const batch = running;
      running = [];
      for (const done of batch) {
        engine.answered += 1;
        done();
      }
      step();
    });
  };
  return engine;
}

/** The rate of answers a client keeping `inFlight` requests in flight gets from an engine, per second, over `untilMs` (the first quarter left out). */
export function bareLoopRate(make: (sim: DiscreteEvents) => SimulatedEngine, inFlight: number, untilMs = 60_000): number {
  const sim = new DiscreteEvents();
  const engine = make(sim);
  const from = untilMs / 4;
  let counted = 0;
  const send = () =>
    engine.submit(() => {
      if (sim.now >= from) counted += 1;
      sim.after(0, send);
    });
  for (let i = 0; i < inFlight; i++) send();
  sim.runUntil(untilMs);
  return (counted * 1000) / (untilMs - from);
}

/**
 * An engine behind a network and a client's event loop: each request reaches it `delayMs` (plus up
 * to `jitterMs`, seeded) after it is sent, and its answer the client as long after. Between two
 * steps an engine that batches idles unless more requests wait than its batch takes, so its best
 * rate needs more in flight than one batch (as the bare loop finds on a real server), and each
 * window of answers is noisier than on the engine alone.
 */
export function behindRoundTrip(engine: SimulatedEngine, sim: DiscreteEvents, options: { delayMs: number; jitterMs: number; seed?: number }): SimulatedEngine {
  const random = seededRandom(options.seed ?? 11);
  const hop = () => options.delayMs + random() * options.jitterMs;
  return {
    get answered() {
      return engine.answered;
    },
    submit(done: () => void) {
      sim.after(hop(), () => engine.submit(() => sim.after(hop(), done)));
    },
    gauges: () => engine.gauges(),
  };
}
