import { describe, expect, it } from 'vitest';
import type { RequestOutcome } from '../src/engine/scheduling/capacity-window.js';
import { EngineCapacity } from '../src/engine/scheduling/engine-capacity.js';
import { ThroughputSearch } from '../src/engine/scheduling/throughput-search.js';
import { DiscreteEvents, seededRandom } from './support/discrete-events.js';
import { type SimulatedEngine, bareLoopRate, behindRoundTrip, continuousBatchingEngine, dynamicBatchingEngine, fixedLatencyEngine } from './support/engine-models.js';

// The concurrency limit against engines in simulated time (test/support/engine-models.ts: stand-ins
// for GPU inference servers, which cannot run here): a client with endless batch work keeps the
// learned limit in flight, with or without scraping the engine's gauges every 250 ms.

interface Run {
  /** Answers per second over the second half. */
  rate: number;
  limit: number;
  highest: number;
  /** Mean requests waiting inside the engine over the second half. */
  meanWaiting: number;
  capacity: EngineCapacity;
}

function run(make: (sim: DiscreteEvents) => SimulatedEngine, options: { ceiling: number; untilMs: number; gauges?: boolean; interactive?: boolean; reserve?: number; change?: { atMs: number; apply: () => void } }): Run {
  const sim = new DiscreteEvents();
  const engine = make(sim);
  const capacity = new EngineCapacity({ ceiling: options.ceiling });
  capacity.interactiveTraffic(options.interactive ?? false);
  let inFlight = 0;
  let highest = 0;
  let counted = 0;
  let waitingArea = 0;
  let sampled = 0;
  const from = options.untilMs / 2;
  const pump = () => {
    highest = Math.max(highest, capacity.limit);
    // Requests sent at one moment all count the whole burst in flight, as the pool counts them
    // (its admissions resume once the scheduler's round is over).
    // Slots kept free for interactive requests (none of which come here) are the limit's too.
    const limit = capacity.limit;
    const reserved = options.reserve ?? 0;
    const burst = Math.max(0, limit - reserved - inFlight);
    inFlight += burst;
    const sentWith = inFlight;
    for (let i = 0; i < burst; i++) {
      const startedAt = sim.now;
      engine.submit(() => {
        inFlight -= 1;
        if (sim.now >= from) counted += 1;
        capacity.record({ startedAt, latencyMs: sim.now - startedAt, outcome: 'answered', inFlight: sentWith, limit, reserved, interactive: 0 });
        sim.after(0, pump);
      });
    }
  };
  const scrape = () => {
    const gauges = engine.gauges();
    if (sim.now >= from) {
      waitingArea += gauges.waiting;
      sampled += 1;
    }
    if (options.gauges) {
      capacity.observeLoad(gauges, sim.now, inFlight + (options.reserve ?? 0), options.reserve ?? 0);
      pump();
    }
    sim.after(250, scrape);
  };
  sim.after(0, pump);
  sim.after(250, scrape);
  if (options.change) sim.at(options.change.atMs, options.change.apply);
  sim.runUntil(options.untilMs);
  return { rate: (counted * 1000) / (options.untilMs - from), limit: capacity.limit, highest, meanWaiting: sampled ? waitingArea / sampled : 0, capacity };
}

/**
 * Several processes, each with its own limit, sending endless batch work to one engine and reading
 * its gauges every 250 ms (the Kafka shape's inference processors, each scraping the engine).
 */
function runFleet<E extends SimulatedEngine>(
  make: (sim: DiscreteEvents) => E,
  options: {
    processes: number;
    ceiling: number;
    untilMs: number;
    staggerMs?: number;
    reserves?: readonly number[];
    interactive?: { perSecond: number; inService: number; send: (engine: E, done: () => void) => void };
    /** Where the measurements start (default: half way). */
    fromMs?: number;
  },
): { rate: number; limits: number[]; highestTotalLimit: number; meanWaiting: number; meanInFlight: number; interactiveMs: number[] } {
  const sim = new DiscreteEvents();
  const engine = make(sim);
  const interactiveMs: number[] = [];
  const from = options.fromMs ?? options.untilMs / 2;
  let counted = 0;
  let waitingArea = 0;
  let inFlightArea = 0;
  let sampled = 0;
  let highestTotalLimit = 0;
  const processes = Array.from({ length: options.processes }, () => ({ capacity: new EngineCapacity({ ceiling: options.ceiling }), inFlight: 0 }));
  // Each processor hears of the fleet's interactive traffic (the API reports its load).
  for (const process of processes) process.capacity.interactiveTraffic(options.interactive !== undefined);
  const reserveOf = (index: number) => options.reserves?.[index] ?? 0;
  const pump = (process: (typeof processes)[number]) => {
    const limit = process.capacity.limit;
    const reserved = reserveOf(processes.indexOf(process));
    // Batch work within the limit less the process's part of the interactive reserve.
    const burst = Math.max(0, limit - reserved - process.inFlight);
    process.inFlight += burst;
    const sentWith = process.inFlight;
    for (let i = 0; i < burst; i++) {
      const startedAt = sim.now;
      engine.submit(() => {
        process.inFlight -= 1;
        if (sim.now >= from) counted += 1;
        process.capacity.record({ startedAt, latencyMs: sim.now - startedAt, outcome: 'answered', inFlight: sentWith, limit, reserved, interactive: 0 });
        sim.after(0, () => pump(process));
      });
    }
  };
  // Each process scrapes on its own beat (a few ms apart), as separate processes do.
  processes.forEach((process, index) => {
    const scrape = () => {
      // Of its part of the reserve, the slots the other process's interactive requests leave free on average (as ReplicaPool tells it).
      const reserves = options.reserves ?? [];
      const total = reserves.reduce((a, b) => a + b, 0);
      const freeWanted = Math.max(0, reserveOf(index) - (total > 0 ? ((options.interactive?.inService ?? 0) * reserveOf(index)) / total : 0));
      process.capacity.observeLoad(engine.gauges(), sim.now, process.inFlight + reserveOf(index), freeWanted);
      pump(process);
      sim.after(250, scrape);
    };
    const startAt = index * (options.staggerMs ?? 0);
    sim.after(startAt, () => pump(process));
    sim.after(startAt + 250 + 7 * index, scrape);
  });
  // Interactive requests of another process (the API's), arriving as a Poisson stream.
  const interactive = options.interactive;
  if (interactive) {
    const random = seededRandom(7);
    const arrive = () => {
      const sentAt = sim.now;
      interactive.send(engine, () => {
        if (sentAt >= from) interactiveMs.push(sim.now - sentAt);
      });
      sim.after((-Math.log(1 - random()) * 1000) / interactive.perSecond, arrive);
    };
    sim.after(0, arrive);
  }
  const sample = () => {
    if (sim.now >= from) {
      waitingArea += engine.gauges().waiting;
      inFlightArea += processes.reduce((sum, process) => sum + process.inFlight, 0);
      highestTotalLimit = Math.max(highestTotalLimit, processes.reduce((sum, process) => sum + process.capacity.limit, 0));
      sampled += 1;
    }
    sim.after(50, sample);
  };
  sim.after(50, sample);
  sim.runUntil(options.untilMs);
  return { rate: (counted * 1000) / (options.untilMs - from), limits: processes.map((process) => process.capacity.limit), highestTotalLimit, meanWaiting: waitingArea / sampled, meanInFlight: inFlightArea / sampled, interactiveMs };
}

/** A batch that always has work: keeps as many requests at the engine as the limit allows, telling the capacity of each answer. */
function batchAlone(sim: DiscreteEvents, engine: SimulatedEngine, capacity: EngineCapacity): void {
  let inFlight = 0;
  const pump = () => {
    while (inFlight < capacity.limit) {
      inFlight += 1;
      const startedAt = sim.now;
      const sentInFlight = inFlight;
      const limit = capacity.limit;
      engine.submit(() => {
        inFlight -= 1;
        capacity.record({ startedAt, latencyMs: sim.now - startedAt, outcome: 'answered', inFlight: sentInFlight, limit });
        pump();
      });
    }
  };
  pump();
}

/** The best a bare loop gets over a sweep of its concurrency up to the same ceiling (in steps of a quarter, and the ceiling itself). */
function bestBareRate(make: (sim: DiscreteEvents) => SimulatedEngine, ceiling: number): number {
  let best = bareLoopRate(make, ceiling, 30_000);
  for (let inFlight = 1; inFlight < ceiling; inFlight = Math.max(inFlight + 1, Math.round(inFlight * 1.25))) best = Math.max(best, bareLoopRate(make, inFlight, 30_000));
  return best;
}

const llm = { maxSeqs: 64, baseMs: 12, perSeqMs: 0.15, prefillMsPerRequest: 0.4, outputTokens: 48 };
const embeddings = { maxBatch: 64, baseMs: 4, perItemMs: 0.08 };

describe('engine capacity: a batch alone fills a batching engine', () => {
  const cases = [
    { name: 'continuous-batching LLM', make: (sim: DiscreteEvents) => continuousBatchingEngine(sim, llm), size: llm.maxSeqs },
    { name: 'embeddings with dynamic batching', make: (sim: DiscreteEvents) => dynamicBatchingEngine(sim, embeddings), size: embeddings.maxBatch },
    {
      name: 'embeddings with dynamic batching, 2–4 ms away',
      make: (sim: DiscreteEvents) => behindRoundTrip(dynamicBatchingEngine(sim, embeddings), sim, { delayMs: 2, jitterMs: 2 }),
      size: embeddings.maxBatch,
    },
  ];
  for (const { name, make, size } of cases) {
    for (const ceilingTimes of [1, 4]) {
      for (const gauges of [false, true]) {
        it(`${name}, ceiling ${ceilingTimes}× its batch, ${gauges ? 'with' : 'without'} gauges: at least 95% of the best bare loop`, () => {
          const best = bestBareRate(make, ceilingTimes * size);
          const result = run(make, { ceiling: ceilingTimes * size, untilMs: 120_000, gauges });
          expect(result.rate / best).toBeGreaterThanOrEqual(0.95);
        });
      }
    }
  }

  it('a latency that rises with the batch is not read as a queue: the limit reaches the engine’s batch, not a tenth of it', () => {
    const result = run((sim) => continuousBatchingEngine(sim, llm), { ceiling: 256, untilMs: 60_000 });
    expect(result.limit).toBeGreaterThanOrEqual(llm.maxSeqs * 0.9);
  });
});

describe('engine capacity: a fixed-latency engine', () => {
  for (const gauges of [false, true]) {
    it(`${gauges ? 'with' : 'without'} gauges, finds its slots from far above and queues next to nothing inside it`, () => {
      const result = run((sim) => fixedLatencyEngine(sim, { slots: 32, latencyMs: 100 }), { ceiling: 128, untilMs: 120_000, gauges });
      expect(result.rate).toBeGreaterThanOrEqual(0.95 * 320);
      // Without gauges it cruises at the smallest limit that serves as much (a request or two below
      // the slots); with them, the batch full plus a lookahead of one waiting.
      expect(result.limit).toBeLessThanOrEqual(gauges ? 33 : 32);
      expect(result.meanWaiting).toBeLessThanOrEqual(gauges ? 1.5 : 0.5);
    });
  }

  it('keeps the slots reserved for interactive requests inside the engine, not above its knee', () => {
    // The batch runs within the limit less 3 kept free: its rate flattens once that fills the
    // engine's 32 slots, at a limit of 35. Taken as the limit, every interactive request would
    // queue behind a full engine; the limit is what the engine holds at the knee.
    const result = run((sim) => fixedLatencyEngine(sim, { slots: 32, latencyMs: 100 }), { ceiling: 128, untilMs: 120_000, reserve: 3 });
    expect(result.limit).toBeLessThanOrEqual(32);
    expect(result.limit).toBeGreaterThanOrEqual(30);
    expect(result.meanWaiting).toBeLessThanOrEqual(0.1);
    // The batch gets what the slots left to it give: 29 of 32.
    expect(result.rate).toBeGreaterThanOrEqual(0.95 * ((32 - 3) / 32) * 320);
    // With the engine's gauges read, the slots held free below the knee are not room to probe for.
    const gauged = run((sim) => fixedLatencyEngine(sim, { slots: 32, latencyMs: 100 }), { ceiling: 128, untilMs: 120_000, reserve: 3, gauges: true, interactive: true });
    expect(gauged.limit).toBeLessThanOrEqual(33);
    expect(gauged.rate).toBeGreaterThanOrEqual(0.95 * ((32 - 3) / 32) * 320);
    // Held below its knee, the cruise still finds an engine that grew: a probe up beats the knee's rate.
    let engine!: ReturnType<typeof fixedLatencyEngine>;
    const grown = run((sim) => (engine = fixedLatencyEngine(sim, { slots: 32, latencyMs: 100 })), { ceiling: 128, untilMs: 600_000, reserve: 3, change: { atMs: 60_000, apply: () => (engine.slots = 64) } });
    // Within the search's resolution (a 32nd) of the 64 slots (found from above: it started at half
    // its ceiling), and nothing waiting inside them.
    expect(grown.limit).toBeGreaterThanOrEqual(58);
    expect(grown.limit).toBeLessThanOrEqual(66);
    expect(grown.meanWaiting).toBeLessThanOrEqual(0.1);
    // At a ceiling the search never passed, there is no knee to correct: the limit stays there.
    const capped = run((sim) => fixedLatencyEngine(sim, { slots: 32, latencyMs: 100 }), { ceiling: 32, untilMs: 60_000, reserve: 3 });
    expect(capped.limit).toBe(32);
  });

  it('two processes on one engine hold its slots between them, not each (the Kafka shape at 4× the slots)', () => {
    // Each process may send 64; the engine's KV cache reads full at its 32 slots, which forbids
    // growth, so each alone would stop at 32 and the two together keep 32 waiting inside the
    // engine, where an interactive request waits behind them for a slot.
    // Started together or a little apart (the second started 1 s after the first, each learned the
    // other's overflow as its own lookahead: 40 in flight, 8 waiting).
    for (const staggerMs of [0, 500, 1_000, 3_000]) {
      const fleet = runFleet((sim) => fixedLatencyEngine(sim, { slots: 32, latencyMs: 100 }), { processes: 2, ceiling: 64, untilMs: 120_000, staggerMs });
      expect(fleet.meanInFlight).toBeLessThanOrEqual(36);
      expect(fleet.meanWaiting).toBeLessThanOrEqual(4);
      expect(fleet.rate).toBeGreaterThanOrEqual(0.95 * 320);
      expect(fleet.limits.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(36);
    }
    // With interactive requests of a third process (20/s of 100 ms, ahead of batch work by
    // priority), each processor keeping its part of the fleet's reserve of 5: the engine shows
    // those slots free, and an interactive request seldom waits for one.
    const make = (sim: DiscreteEvents) => fixedLatencyEngine(sim, { slots: 32, latencyMs: 100 });
    const beside = runFleet(make, { processes: 2, ceiling: 64, untilMs: 180_000, staggerMs: 1_000, reserves: [3, 2], interactive: { perSecond: 20, inService: 2, send: (engine, done) => engine.submitUrgent(done) } });
    const sorted = [...beside.interactiveMs].sort((a, b) => a - b);
    const p99 = sorted[Math.floor(0.99 * (sorted.length - 1))]!;
    expect(sorted.length).toBeGreaterThan(1_000);
    expect(p99).toBeLessThanOrEqual(1.1 * 102);
    // The batch keeps the rest: 32 slots less the reserve of 5, of which interactive requests use about 2.
    expect(beside.rate).toBeGreaterThanOrEqual(0.95 * (27 / 32) * 320);
  });

  it('follows the engine when another tenant takes half of it, and when it comes back', () => {
    let engine!: ReturnType<typeof fixedLatencyEngine>;
    const make = (sim: DiscreteEvents) => (engine = fixedLatencyEngine(sim, { slots: 32, latencyMs: 100 }));
    const shrunk = run(make, { ceiling: 128, untilMs: 240_000, change: { atMs: 60_000, apply: () => (engine.slots = 16) } });
    expect(shrunk.limit).toBeLessThanOrEqual(16);
    expect(shrunk.limit).toBeGreaterThanOrEqual(14);
    const grown = run(make, { ceiling: 128, untilMs: 600_000, change: { atMs: 60_000, apply: () => (engine.slots = 64) } });
    expect(grown.limit).toBeGreaterThanOrEqual(58);
    // A request or two above the slots queues that many inside the engine: an interactive request
    // arriving waits for one slot more in 64, about 2 ms of 100.
    expect(grown.limit).toBeLessThanOrEqual(66);
  });

  it('while interactive requests are served, probes up no sooner than 5 minutes after startup and the search settled', () => {
    const sim = new DiscreteEvents();
    const engine = fixedLatencyEngine(sim, { slots: 32, latencyMs: 100 });
    const capacity = new EngineCapacity({ ceiling: 128 });
    capacity.interactiveTraffic(true);
    let inFlight = 0;
    let highestAfterSettling = 0;
    const pump = () => {
      // Startup and the search settle within two seconds here.
      if (sim.now >= 3_000) highestAfterSettling = Math.max(highestAfterSettling, capacity.limit);
      const limit = capacity.limit;
      const burst = Math.max(0, limit - inFlight);
      inFlight += burst;
      const sentWith = inFlight;
      for (let i = 0; i < burst; i++) {
        const startedAt = sim.now;
        engine.submit(() => {
          inFlight -= 1;
          capacity.record({ startedAt, latencyMs: sim.now - startedAt, outcome: 'answered', inFlight: sentWith, limit });
          sim.after(0, pump);
        });
      }
    };
    sim.after(0, pump);
    sim.runUntil(200_000);
    expect(highestAfterSettling).toBeGreaterThanOrEqual(28);
    expect(highestAfterSettling).toBeLessThanOrEqual(32);
  });

  it('while interactive requests are served, a startup a full KV cache stopped where it was counts as a probe up: the next waits 5 minutes', () => {
    // Two processes of 64 on a 32-slot engine whose KV cache reads full at its slots: each
    // startup's doubling to 32 stops there and cruises at the value it had, and the gauges then
    // shed what waits. Counted as settling only when the value moved, that left the next probe up
    // free to start a second or two later, inside the interactive traffic: on the Kafka shape at
    // 4× the slots, one processor doubled again to 36 with 21 requests waiting in the engine, and
    // the interactive p99 of the seconds after the batch started went to 1.4× alone.
    const make = (sim: DiscreteEvents) => fixedLatencyEngine(sim, { slots: 32, latencyMs: 100 });
    const fleet = runFleet(make, { processes: 2, ceiling: 64, untilMs: 40_000, fromMs: 6_000, reserves: [2, 1], interactive: { perSecond: 20, inService: 2, send: (engine, done) => engine.submitUrgent(done) } });
    // Before: one processor went to 54 at 6 s and the other fell to 2, their limits summing to 62
    // with about 20 requests waiting in the engine from then on.
    expect(fleet.highestTotalLimit).toBeLessThanOrEqual(34);
    expect(fleet.meanWaiting).toBeLessThanOrEqual(1);
    const sorted = [...fleet.interactiveMs].sort((a, b) => a - b);
    expect(sorted.length).toBeGreaterThan(500);
    expect(sorted[Math.floor(0.99 * (sorted.length - 1))]!).toBeLessThanOrEqual(1.25 * 102);
  });

  it('starts at half its ceiling with no interactive request served, at 16 while some are, until it has measured', () => {
    const capacity = new EngineCapacity({ ceiling: 128 });
    expect(capacity.limit).toBe(64);
    capacity.interactiveTraffic(true);
    expect(capacity.limit).toBe(16);
    capacity.interactiveTraffic(false);
    expect(capacity.limit).toBe(64);
    expect(new EngineCapacity({ ceiling: 20 }).limit).toBe(16);
    expect(new EngineCapacity({ ceiling: 8 }).limit).toBe(8);
    // A start set by hand stays where it was set.
    const set = new EngineCapacity({ ceiling: 128, initial: 32 });
    set.interactiveTraffic(true);
    expect(set.limit).toBe(32);
    // Once a window is measured, interactive traffic no longer moves the start.
    const sim = new DiscreteEvents();
    const running = new EngineCapacity({ ceiling: 128 });
    batchAlone(sim, fixedLatencyEngine(sim, { slots: 256, latencyMs: 100 }), running);
    sim.runUntil(1_000);
    expect(running.limit).toBeGreaterThanOrEqual(64);
    running.interactiveTraffic(true);
    expect(running.limit).toBeGreaterThanOrEqual(64);
  });

  it('moved down by interactive traffic while a batch runs at its first start, still finds the engine', () => {
    // The batch went out at 64; an interactive request is served 50 ms later, before any window:
    // the start drops to 16 (what went out at 64 is not counted as 16's, like any change's first
    // window), and startup doubles from there to the engine's slots within a second.
    const sim = new DiscreteEvents();
    const capacity = new EngineCapacity({ ceiling: 128 });
    batchAlone(sim, fixedLatencyEngine(sim, { slots: 128, latencyMs: 100 }), capacity);
    expect(capacity.limit).toBe(64);
    sim.after(50, () => capacity.interactiveTraffic(true, sim.now));
    sim.runUntil(60);
    expect(capacity.limit).toBe(16);
    sim.runUntil(2_000);
    expect(capacity.limit).toBeGreaterThanOrEqual(112);
  });

  it('never passes its ceiling, and does not grow while the limit is not in use', () => {
    const capped = run((sim) => fixedLatencyEngine(sim, { slots: 64, latencyMs: 100 }), { ceiling: 16, untilMs: 30_000 });
    expect(capped.highest).toBe(16);
    const idle = new EngineCapacity({ ceiling: 64, initial: 4 });
    for (let i = 0; i < 2000; i++) idle.record({ startedAt: i * 10, latencyMs: 100, outcome: 'answered', inFlight: 1, limit: 4 });
    expect(idle.limit).toBe(4);
  });
});

describe('throughput search', () => {
  it('narrows the knee by halves once its secant is contradicted, rather than a step at a time', () => {
    // A 32-slot engine whose rate at 32 was read low (measured while it filled): the secant from
    // there points above every value already at the best rate.
    const rateAt = (value: number) => (value === 32 ? 0.82 : 1) * Math.min(value, 32) * 10;
    const search = new ThroughputSearch({ least: 1, most: 128, initial: 16 });
    const visited: number[] = [];
    for (let at = 0; search.phase !== 'cruise' && at < 100_000; at += 1_000) {
      if (visited.at(-1) !== search.value) visited.push(search.value);
      search.measured(rateAt(search.value), 1_000, at);
    }
    expect(search.phase).toBe('cruise');
    expect(search.value).toBeGreaterThanOrEqual(32);
    expect(search.value).toBeLessThanOrEqual(34);
    // 16, 32, 64, 128, then at most five values to the knee (a step at a time took eight: 39 … 33).
    expect(visited.length).toBeLessThanOrEqual(9);
  });
});

describe('engine capacity: refusals and gauges', () => {
  it.each<RequestOutcome>(['overloaded', 'timeout'])('halves at once on %s, once per round of requests sent after the last cut', (outcome) => {
    const capacity = new EngineCapacity({ ceiling: 64, initial: 32 });
    capacity.record({ startedAt: 0, latencyMs: 50, outcome, inFlight: 32 });
    expect(capacity.limit).toBe(16);
    // Sent before that cut: says nothing new.
    capacity.record({ startedAt: 10, latencyMs: 50, outcome, inFlight: 32 });
    expect(capacity.limit).toBe(16);
    capacity.record({ startedAt: 60, latencyMs: 50, outcome, inFlight: 16 });
    expect(capacity.limit).toBe(8);
  });

  it('after a refusal grows back at once, to the value refused, and probes past it only after the shortest gap', () => {
    const search = new ThroughputSearch({ least: 1, most: 64, initial: 32, probeGapMs: [5_000, 300_000] });
    search.overloaded(0);
    expect(search.value).toBe(16);
    // An engine serving ten a second per request in flight: every doubling doubles the rate.
    let at = 0;
    const measure = () => search.measured(search.value * 10, 1000, (at += 100), { mayProbeUp: true });
    for (let i = 0; i < 4; i++) measure();
    expect(search.value).toBe(32);
    expect(search.phase).toBe('cruise');
    for (let i = 0; i < 200 && search.value <= 32; i++) measure();
    expect(search.value).toBeGreaterThan(32);
    expect(at).toBeGreaterThanOrEqual(5_000);
  });

  it('ignores other failures (a 500 or a refused connection says nothing about load)', () => {
    const capacity = new EngineCapacity({ ceiling: 8, initial: 8 });
    for (let i = 0; i < 100; i++) capacity.record({ startedAt: i, latencyMs: 1, outcome: 'failed', inFlight: 8 });
    expect(capacity.limit).toBe(8);
  });

  it('with gauges, sheds at once what another client’s load makes wait beyond its lookahead; without, at the next probe down', () => {
    // A second client starts keeping 16 requests in the 32-slot engine at 60 s.
    const shed = (gauges: boolean) => {
      let engine!: ReturnType<typeof fixedLatencyEngine>;
      let sim!: DiscreteEvents;
      const make = (s: DiscreteEvents) => {
        sim = s;
        return (engine = fixedLatencyEngine(s, { slots: 32, latencyMs: 100 }));
      };
      const other = () => {
        const send = () => engine.submit(() => sim.after(0, send));
        for (let i = 0; i < 16; i++) send();
      };
      return run(make, { ceiling: 128, untilMs: 62_000, gauges, change: { atMs: 60_000, apply: other } });
    };
    expect(shed(true).limit).toBeLessThanOrEqual(20);
    expect(shed(false).limit).toBeGreaterThanOrEqual(30);
  });

  it('with gauges, probes up at once when the engine has room (another client left); a KV cache nearly full forbids it', () => {
    // A second client's 16 requests go ahead of ours in a 48-slot engine until 60 s, then stop:
    // the batch runs fewer than it did, and the engine has room.
    const grow = (gauges: boolean, untilMs = 70_000) => {
      let engine!: ReturnType<typeof fixedLatencyEngine>;
      let stopped = false;
      const make = (sim: DiscreteEvents) => {
        engine = fixedLatencyEngine(sim, { slots: 48, latencyMs: 100 });
        const send = () => engine.submitUrgent(() => stopped || sim.after(0, send));
        for (let i = 0; i < 16; i++) send();
        return engine;
      };
      return run(make, { ceiling: 128, untilMs, gauges, change: { atMs: 60_000, apply: () => (stopped = true) } });
    };
    expect(grow(true, 59_000).limit).toBeLessThanOrEqual(34);
    expect(grow(true).limit).toBeGreaterThanOrEqual(44);
    expect(grow(false).limit).toBeLessThanOrEqual(34);
    const full = new EngineCapacity({ ceiling: 64, initial: 8 });
    const limits: number[] = [];
    for (let t = 0; t < 200_000; t += 10) {
      if (t % 250 === 0) full.observeLoad({ running: 8, waiting: 0, kvUsage: 0.97 }, t, 8);
      full.record({ startedAt: t - 100, latencyMs: 100, outcome: 'answered', inFlight: full.limit, limit: full.limit });
      limits.push(full.limit);
    }
    // It may go down and back, never above where the KV cache was found full.
    expect(Math.max(...limits.slice(limits.length / 2))).toBeLessThanOrEqual(8);
  });

  it('falls back to throughput once the gauges go stale', () => {
    const capacity = new EngineCapacity({ ceiling: 64, initial: 4, loadStaleMs: 3_000 });
    capacity.observeLoad({ running: 4, waiting: 0 }, 0, 4);
    expect(capacity.source).toBe('gauges');
    capacity.record({ startedAt: 5_000, latencyMs: 10, outcome: 'answered', inFlight: 4, limit: 4 });
    expect(capacity.source).toBe('throughput');
  });

  it('gives a slot back to another process’s interactive requests, not below half, until interactive traffic stops', () => {
    const capacity = new EngineCapacity({ ceiling: 8, initial: 8 });
    capacity.interactiveTraffic(true);
    const given = Array.from({ length: 8 }, (_, i) => capacity.yieldSlot(i * 1000));
    expect(given.filter(Boolean)).toHaveLength(4);
    expect(capacity.limit).toBe(4);
    capacity.interactiveTraffic(false);
    expect(capacity.limit).toBe(8);
  });

  it('rejects a ceiling below 1 by name', () => {
    expect(() => new EngineCapacity({ ceiling: 0 })).toThrow(/ceiling/);
  });
});
