import { AdaptiveConcurrency, type RequestOutcome } from '../../src/engine/scheduling/adaptive-concurrency.js';
import { DiscreteEvents, seededRandom } from './discrete-events.js';

// Engines an AdaptiveConcurrency is driven against in the tests, in simulated time.

/** Feeds `count` results that each started at a full limit, one latency apart per limit's worth. */
export function feed(limiter: AdaptiveConcurrency, clock: { t: number }, count: number, latencyMs: number, outcome: RequestOutcome = 'answered') {
  for (let i = 0; i < count; i++) {
    const startedAt = clock.t;
    clock.t += latencyMs / Math.max(1, limiter.limit);
    limiter.record({ startedAt, latencyMs, outcome, inFlight: limiter.limit });
  }
}

/** A saturated replica: every request starts with the limit in flight; latency from the engine model. */
export function drive(limiter: AdaptiveConcurrency, clock: { t: number }, count: number, latencyAt: (inFlight: number) => number): number[] {
  const seen: number[] = [];
  for (let i = 0; i < count; i++) {
    const inFlight = limiter.limit;
    const startedAt = clock.t;
    const latencyMs = latencyAt(inFlight);
    clock.t += latencyMs / inFlight;
    limiter.record({ startedAt, latencyMs, outcome: 'answered', inFlight });
    seen.push(limiter.limit);
  }
  return seen;
}

/**
 * A saturated client against an engine of `slots` slots and 100 ms ± 2% per request, in simulated
 * time: requests leave only when answered, so after a cut the excess drains while the windows
 * that set the next limit are read (drive() above skips that transient). Returns the limit at the
 * end, the highest it reached, and the mean queue inside the engine over the second half.
 */
export function simulateEngine(seed: number, options: { interactive: boolean; slots: number; ceiling: number; untilMs: number }) {
  const sim = new DiscreteEvents();
  const random = seededRandom(seed);
  const limiter = new AdaptiveConcurrency({ ceiling: options.ceiling });
  limiter.interactiveTraffic(options.interactive);
  let running = 0;
  let inFlight = 0;
  let highest = 0;
  const queue: Array<() => void> = [];
  const from = options.untilMs / 2;
  let queuedArea = 0;
  let lastChange = 0;
  const account = () => {
    if (sim.now > from) queuedArea += queue.length * (sim.now - Math.max(lastChange, from));
    lastChange = sim.now;
  };
  const serve = (done: () => void) => {
    running += 1;
    sim.after(100 * (0.98 + 0.04 * random()), () => {
      account();
      running -= 1;
      done();
      const next = queue.shift();
      if (next) serve(next);
    });
  };
  const pump = () => {
    highest = Math.max(highest, limiter.limit);
    while (inFlight < limiter.limit) {
      const startedAt = sim.now;
      inFlight += 1;
      const sentWith = inFlight;
      const limit = limiter.limit;
      const done = () => {
        inFlight -= 1;
        limiter.record({ startedAt, latencyMs: sim.now - startedAt, outcome: 'answered', inFlight: sentWith, limit });
        sim.after(0, pump);
      };
      account();
      if (running < options.slots) serve(done);
      else queue.push(done);
    }
  };
  sim.after(0, pump);
  sim.runUntil(options.untilMs);
  return { limit: limiter.limit, highest, meanQueued: queuedArea / (options.untilMs - from) };
}
