import { describe, expect, it } from 'vitest';
import { type Admission, FleetScheduler, type WorkItem } from '../src/engine/scheduling/scheduler.js';
import { DiscreteEvents, jainIndex, seededRandom } from './support/discrete-events.js';

const hour = 3_600_000;

/** A scheduler on a settable clock. */
function scheduler(now: { t: number }, settings: ConstructorParameters<typeof FleetScheduler>[0] = {}) {
  return new FleetScheduler<WorkItem>({ now: () => now.t, ...settings });
}

const ids = (admissions: ReadonlyArray<Admission<WorkItem>>) => admissions.map((admission) => admission.work.id);
const one = [{ id: 'r1', limit: 1 }];

describe('the scheduler: order', () => {
  it('runs interactive before batch before background, whatever order they came in', () => {
    const clock = { t: 0 };
    const s = scheduler(clock);
    s.enqueue({ id: 'bg', serviceClass: 'background', fairnessKey: 'job-c' });
    s.enqueue({ id: 'batch', serviceClass: 'batch', deadline: 24 * hour, fairnessKey: 'job-b' });
    s.enqueue({ id: 'chat', serviceClass: 'interactive' });
    const order: string[] = [];
    for (let step = 0; step < 3; step++) {
      const admitted = s.admit(one);
      expect(admitted).toHaveLength(1);
      expect(admitted[0]!.replica).toBe('r1');
      order.push(admitted[0]!.work.id);
      clock.t += 100;
      s.complete(admitted[0]!.work.id);
    }
    expect(order).toEqual(['chat', 'batch', 'bg']);
    expect(s.admit(one)).toEqual([]);
  });

  it('an interactive request takes the next free slot, ahead of every batch line queued before it', () => {
    const clock = { t: 0 };
    const s = scheduler(clock);
    for (let i = 0; i < 10; i++) s.enqueue({ id: `line-${i}`, serviceClass: 'batch', deadline: hour, fairnessKey: 'job' });
    const replicas = [{ id: 'r1', limit: 4 }];
    expect(ids(s.admit(replicas))).toEqual(['line-0', 'line-1', 'line-2', 'line-3']);
    s.enqueue({ id: 'chat', serviceClass: 'interactive' });
    expect(s.admit(replicas)).toEqual([]);
    s.complete('line-0');
    expect(ids(s.admit(replicas))).toEqual(['chat']);
    // While it waits for a slot, a slot freed goes to it, not to the lines queued before it.
    s.enqueue({ id: 'chat-2', serviceClass: 'interactive' });
    s.complete('line-1');
    expect(ids(s.admit(replicas))).toEqual(['chat-2']);
  });

  it('runs a tight batch created after a loose one first (earliest deadline first)', () => {
    const clock = { t: 0 };
    const s = scheduler(clock);
    for (let i = 0; i < 3; i++) s.enqueue({ id: `loose-${i}`, serviceClass: 'batch', deadline: 24 * hour, fairnessKey: 'job-a' });
    clock.t = 1_000;
    for (let i = 0; i < 3; i++) s.enqueue({ id: `tight-${i}`, serviceClass: 'batch', deadline: clock.t + hour, fairnessKey: 'job-b' });
    // The same job's own batches too.
    s.enqueue({ id: 'tight-a', serviceClass: 'batch', deadline: clock.t + 10 * 60_000, fairnessKey: 'job-a' });
    const order: string[] = [];
    for (let step = 0; step < 7; step++) {
      const [admitted] = s.admit(one);
      order.push(admitted!.work.id);
      s.complete(admitted!.work.id);
    }
    expect(order).toEqual(['tight-a', 'tight-0', 'tight-1', 'tight-2', 'loose-0', 'loose-1', 'loose-2']);
  });

  it('runs background work only on capacity no batch or interactive request wants', () => {
    const clock = { t: 0 };
    const s = scheduler(clock);
    for (let i = 0; i < 5; i++) s.enqueue({ id: `bg-${i}`, serviceClass: 'background', fairnessKey: 'job-bg' });
    s.enqueue({ id: 'line-0', serviceClass: 'batch', deadline: hour, fairnessKey: 'job' });
    s.enqueue({ id: 'line-1', serviceClass: 'batch', deadline: hour, fairnessKey: 'job' });
    const replicas = [{ id: 'r1', limit: 4 }];
    expect(ids(s.admit(replicas))).toEqual(['line-0', 'line-1', 'bg-0', 'bg-1']);
    s.enqueue({ id: 'line-2', serviceClass: 'batch', deadline: 100 * hour, fairnessKey: 'job-2' });
    s.complete('bg-0');
    expect(ids(s.admit(replicas))).toEqual(['line-2']);
    s.complete('line-0');
    expect(ids(s.admit(replicas))).toEqual(['bg-2']);
    expect(s.queued()).toEqual({ interactive: 0, batch: 0, background: 2 });
  });
});

describe('the scheduler: replicas', () => {
  it('spreads work to the replica with the most free slots and holds each to its learned limit', () => {
    const clock = { t: 0 };
    const s = scheduler(clock);
    for (let i = 0; i < 10; i++) s.enqueue({ id: `line-${i}`, serviceClass: 'batch', deadline: hour, fairnessKey: 'job' });
    const admitted = s.admit([
      { id: 'small', limit: 2 },
      { id: 'large', limit: 4 },
    ]);
    expect(admitted.filter((a) => a.replica === 'small')).toHaveLength(2);
    expect(admitted.filter((a) => a.replica === 'large')).toHaveLength(4);
    // The large replica's learned limit shrinks to 2: nothing more goes there until it drains below 2.
    const shrunk = [
      { id: 'small', limit: 2 },
      { id: 'large', limit: 2 },
    ];
    const onLarge = admitted.filter((a) => a.replica === 'large').map((a) => a.work.id);
    s.complete(onLarge[0]!);
    expect(s.admit(shrunk)).toEqual([]);
    s.complete(onLarge[1]!);
    s.complete(onLarge[2]!);
    expect(s.admit(shrunk).map((a) => a.replica)).toEqual(['large']);
    expect(s.inFlight('large')).toEqual({ interactive: 0, batch: 2, background: 0 });
  });

  it('sends an interactive request past the learned limit, up to the ceiling; batch lines wait for the limit', () => {
    const clock = { t: 0 };
    const s = scheduler(clock);
    for (let i = 0; i < 6; i++) s.enqueue({ id: `line-${i}`, serviceClass: 'batch', deadline: hour, fairnessKey: 'job' });
    const replicas = [{ id: 'r1', limit: 2, ceiling: 3 }];
    expect(ids(s.admit(replicas))).toEqual(['line-0', 'line-1']);
    s.enqueue({ id: 'chat', serviceClass: 'interactive' });
    s.enqueue({ id: 'chat-2', serviceClass: 'interactive' });
    // One past the limit, to the ceiling; the second waits for a slot, and the batch lines behind it.
    expect(ids(s.admit(replicas))).toEqual(['chat']);
    s.complete('line-0');
    expect(ids(s.admit(replicas))).toEqual(['chat-2']);
    s.complete('chat');
    s.complete('chat-2');
    expect(ids(s.admit(replicas))).toEqual(['line-2']);
  });

  it('leaves out unavailable replicas, and sends a retry elsewhere when another has a slot', () => {
    const clock = { t: 0 };
    const s = scheduler(clock);
    s.enqueue({ id: 'a', serviceClass: 'interactive' });
    expect(s.admit([{ id: 'r1', limit: 4, available: false }])).toEqual([]);
    expect(s.admit([{ id: 'r1', limit: 4 }, { id: 'r2', limit: 1 }]).map((a) => a.replica)).toEqual(['r1']);
    s.enqueue({ id: 'retry', serviceClass: 'interactive', avoid: new Set(['r1']) });
    expect(s.admit([{ id: 'r1', limit: 4 }, { id: 'r2', limit: 1 }]).map((a) => a.replica)).toEqual(['r2']);
    // Nowhere else has a slot: the avoided replica is better than waiting.
    s.enqueue({ id: 'retry-2', serviceClass: 'interactive', avoid: new Set(['r1']) });
    expect(s.admit([{ id: 'r1', limit: 4 }, { id: 'r2', limit: 1 }]).map((a) => a.replica)).toEqual(['r1']);
  });

  it('never admits withdrawn work, and refuses an id already queued or in flight', () => {
    const clock = { t: 0 };
    const s = scheduler(clock);
    s.enqueue({ id: 'x', serviceClass: 'batch', deadline: hour, fairnessKey: 'job' });
    s.enqueue({ id: 'y', serviceClass: 'batch', deadline: hour, fairnessKey: 'job' });
    expect(() => s.enqueue({ id: 'x', serviceClass: 'interactive' })).toThrow(/already/);
    expect(s.withdraw('x')?.id).toBe('x');
    expect(s.withdraw('x')).toBeUndefined();
    expect(ids(s.admit([{ id: 'r1', limit: 4 }]))).toEqual(['y']);
    expect(s.withdraw('y')).toBeUndefined();
    expect(() => s.enqueue({ id: 'y', serviceClass: 'batch' })).toThrow(/already/);
    s.complete('y');
    s.complete('y');
    expect(s.inFlight()).toEqual({ interactive: 0, batch: 0, background: 0 });
  });
});

describe('the scheduler: fair share between jobs of equal urgency', () => {
  /** Two jobs with 10× different backlogs and the same deadline, on 8 slots, until the small one is done. */
  function run(durations: { big: number; small: number }) {
    const sim = new DiscreteEvents();
    const random = seededRandom(7);
    const s = new FleetScheduler<WorkItem>({ now: () => sim.now });
    const deadline = 24 * hour;
    for (let i = 0; i < 1000; i++) s.enqueue({ id: `big-${i}`, serviceClass: 'batch', deadline, fairnessKey: 'big' });
    for (let i = 0; i < 100; i++) s.enqueue({ id: `small-${i}`, serviceClass: 'batch', deadline, fairnessKey: 'small' });
    const slotTime = { big: 0, small: 0 };
    const served = { big: 0, small: 0 };
    let smallLeft = 100;
    const pump = () => {
      for (const { work } of s.admit([{ id: 'r1', limit: 8 }])) {
        const key = work.fairnessKey as 'big' | 'small';
        const duration = durations[key] * (0.5 + random());
        sim.after(duration, () => {
          if (smallLeft === 0) return;
          s.complete(work.id);
          slotTime[key] += duration;
          served[key] += 1;
          if (key === 'small') smallLeft -= 1;
          pump();
        });
      }
    };
    pump();
    sim.runUntil(10 * hour);
    return { slotTime, served };
  }

  it('shares slots equally while both have work, though one was queued first with 10× the lines', () => {
    const { slotTime, served } = run({ big: 100, small: 100 });
    expect(served.small).toBe(100);
    expect(jainIndex([slotTime.big, slotTime.small])).toBeGreaterThanOrEqual(0.95);
    expect(jainIndex([served.big, served.small])).toBeGreaterThanOrEqual(0.95);
  });

  it('shares engine time, not request counts, when one job’s lines take 3× longer', () => {
    const { slotTime } = run({ big: 300, small: 100 });
    expect(jainIndex([slotTime.big, slotTime.small])).toBeGreaterThanOrEqual(0.95);
  });
});

describe('the scheduler: fair share between accounts, then between their jobs', () => {
  /** Account a with three jobs and account b with one, all equally urgent with plenty queued, on 12 slots. */
  function shares(groups: boolean) {
    const sim = new DiscreteEvents();
    const s = new FleetScheduler<WorkItem>({ now: () => sim.now });
    const deadline = 24 * hour;
    const jobs = [
      ['a', 'one'],
      ['a', 'two'],
      ['a', 'three'],
      // Named like a job of a: the account tells them apart.
      ['b', 'one'],
    ] as const;
    for (const [account, job] of jobs) {
      for (let i = 0; i < 300; i++) s.enqueue({ id: `${account}-${job}-${i}`, serviceClass: 'batch', deadline, fairnessKey: job, ...(groups ? { fairnessGroup: account } : {}) });
    }
    const served: Record<string, number> = {};
    const pump = () => {
      for (const { work } of s.admit([{ id: 'r1', limit: 12 }])) {
        sim.after(100, () => {
          s.complete(work.id);
          const [account, job] = work.id.split('-');
          served[`${account}-${job}`] = (served[`${account}-${job}`] ?? 0) + 1;
          pump();
        });
      }
    };
    pump();
    sim.runUntil(4_000);
    return served;
  }

  it('gives each account half the slots, and each of a’s three jobs a third of its half', () => {
    const served = shares(true);
    const a = served['a-one']! + served['a-two']! + served['a-three']!;
    expect(jainIndex([a, served['b-one']!])).toBeGreaterThanOrEqual(0.99);
    expect(jainIndex([served['a-one']!, served['a-two']!, served['a-three']!])).toBeGreaterThanOrEqual(0.99);
  });

  it('without accounts shares between jobs alone, as before (and two jobs of one name are one key)', () => {
    const served = shares(false);
    // The keys one (a's and b's, one key without groups), two and three: a third each.
    expect(jainIndex([served['a-one']! + (served['b-one'] ?? 0), served['a-two']!, served['a-three']!])).toBeGreaterThanOrEqual(0.99);
  });
});

describe('the scheduler: headroom for interactive traffic', () => {
  /**
   * 64 slots on two replicas, a batch backlog that never runs out, and interactive requests
   * arriving as a Poisson stream at 2/s for `interactiveUntil`, each 0.5–1.5 s in service.
   */
  function run(settings: ConstructorParameters<typeof FleetScheduler>[0], interactiveUntil: number, until: number) {
    const sim = new DiscreteEvents();
    const random = seededRandom(42);
    const s = new FleetScheduler<WorkItem>({ now: () => sim.now, ...settings });
    const replicas = [
      { id: 'r1', limit: 32 },
      { id: 'r2', limit: 32 },
    ];
    for (let i = 0; i < 60_000; i++) s.enqueue({ id: `line-${i}`, serviceClass: 'batch', deadline: 24 * hour, fairnessKey: 'job' });
    const measureFrom = 120_000;
    const arrivedAt = new Map<string, number>();
    const waits: number[] = [];
    const area = { batch: 0, interactive: 0 };
    let maxBatchWhileInteractive = 0;
    let lastChange = 0;
    const inFlight = { batch: 0, interactive: 0 };
    const account = () => {
      const from = Math.max(lastChange, measureFrom);
      if (sim.now > from && sim.now <= interactiveUntil) {
        area.batch += inFlight.batch * (sim.now - from);
        area.interactive += inFlight.interactive * (sim.now - from);
      }
      lastChange = sim.now;
    };
    const pump = () => {
      account();
      for (const { work } of s.admit(replicas)) {
        const interactive = work.serviceClass === 'interactive';
        if (interactive) {
          if (sim.now >= measureFrom) waits.push(sim.now - arrivedAt.get(work.id)!);
          inFlight.interactive += 1;
        } else inFlight.batch += 1;
        const duration = interactive ? 500 + random() * 1000 : 800 + random() * 400;
        sim.after(duration, () => {
          account();
          s.complete(work.id);
          if (interactive) inFlight.interactive -= 1;
          else inFlight.batch -= 1;
          pump();
        });
      }
      if (sim.now >= measureFrom && sim.now <= interactiveUntil) maxBatchWhileInteractive = Math.max(maxBatchWhileInteractive, inFlight.batch);
    };
    let n = 0;
    const arrive = () => {
      const id = `chat-${n++}`;
      arrivedAt.set(id, sim.now);
      s.enqueue({ id, serviceClass: 'interactive' });
      pump();
      const next = -Math.log(1 - random()) * 500;
      if (sim.now + next < interactiveUntil) sim.after(next, arrive);
    };
    sim.after(0, arrive);
    sim.after(0, pump);
    const samples: Array<{ at: number; batch: number; reserve: number }> = [];
    for (let t = 0; t <= until; t += 5_000) sim.at(t, () => samples.push({ at: t, batch: inFlight.batch, reserve: s.reserve(replicas) }));
    sim.runUntil(until);
    const span = interactiveUntil - measureFrom;
    const meanBatch = area.batch / span;
    const meanInteractive = area.interactive / span;
    return {
      immediate: waits.filter((wait) => wait === 0).length / waits.length,
      meanWait: waits.reduce((a, b) => a + b, 0) / waits.length,
      batchShareOfLeftover: meanBatch / (64 - meanInteractive),
      maxBatchWhileInteractive,
      samples,
    };
  }

  it('keeps a slot free for most interactive requests while batches use at least 90% of the rest', () => {
    const result = run({}, 720_000, 720_000);
    expect(result.immediate).toBeGreaterThanOrEqual(0.9);
    expect(result.batchShareOfLeftover).toBeGreaterThanOrEqual(0.9);
    expect(result.batchShareOfLeftover).toBeLessThanOrEqual(1);
    expect(result.maxBatchWhileInteractive).toBeLessThan(64);
  });

  it('without headroom interactive requests wait behind batch lines for a slot (the comparison)', () => {
    const result = run({ headroom: { timeConstantMs: 30_000, spread: 2, idleAfterMs: -1, leftoverShare: 0.9 } }, 720_000, 720_000);
    expect(result.immediate).toBeLessThan(0.2);
    expect(result.maxBatchWhileInteractive).toBe(64);
  });

  it('follows the interactive load: reserves slots while it lasts, gives them back once it stops', () => {
    const result = run({}, 300_000, 600_000);
    const at = (t: number) => result.samples.find((sample) => sample.at === t)!;
    // Load ≈ 2 requests in service: about ⌈2 + 2√2⌉ = 5 slots.
    expect(at(290_000).reserve).toBeGreaterThanOrEqual(4);
    expect(at(290_000).reserve).toBeLessThanOrEqual(6);
    // Decaying after the last arrival…
    expect(at(360_000).reserve).toBeLessThan(at(290_000).reserve);
    // …and none once interactive traffic has been idle for idleAfterMs (120 s): batches fill every slot.
    expect(at(440_000).reserve).toBe(0);
    expect(at(445_000).batch).toBe(64);
  });
});
