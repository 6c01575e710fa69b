import { BinaryHeap } from '../../platform/binary-heap.js';
import { urgencyLevel } from './urgency.js';

interface Entry<T> {
  readonly item: T;
  readonly deadline: number;
  readonly seq: number;
  withdrawn: boolean;
}

interface Flow<T> {
  readonly key: string;
  readonly heap: BinaryHeap<Entry<T>>;
  /** Taken and not yet finished. */
  inFlight: number;
  /** When it was last taken from, in take order; 0 never. */
  lastTaken: number;
}

/**
 * Work waiting per fairness key (a job), taken most urgent first, and among equally urgent keys
 * fairly.
 *
 * Urgency is the urgency level of each key's earliest deadline (a log scale of the slack): a key
 * with a tighter deadline goes first, however late its work came. Keys of the same level share
 * the engine by "fewest in flight": the next slot goes to the key holding the fewest slots now
 * (ties: the one served longest ago, so round robin). That divides what is scarce, slot-time,
 * rather than request counts: a job whose lines take three times as long holds its slots three
 * times as long and so starts a third as many, without any estimate of cost; it needs no state
 * beyond counts the scheduler keeps anyway, and a key that comes back after a pause gets its
 * share at once with no credit or debt carried over (unlike virtual-time schemes, which need
 * their clocks reset when a key goes idle).
 */
export class FairDeadlineQueue<T> {
  private readonly flows = new Map<string, Flow<T>>();
  private readonly byId = new Map<string, { entry: Entry<T>; flow: Flow<T> }>();
  private seq = 0;
  private takes = 0;
  private waiting = 0;

  constructor(private readonly urgencyUnitMs = 60_000) {}

  get size(): number {
    return this.waiting;
  }

  push(id: string, item: T, key: string, deadline: number | undefined): void {
    const flow = this.flow(key);
    const entry: Entry<T> = { item, deadline: deadline ?? Number.POSITIVE_INFINITY, seq: this.seq++, withdrawn: false };
    flow.heap.push(entry);
    this.byId.set(id, { entry, flow });
    this.waiting += 1;
  }

  /** Removes waiting work; undefined when it is not waiting here. */
  withdraw(id: string): T | undefined {
    const found = this.byId.get(id);
    if (!found) return undefined;
    this.byId.delete(id);
    // Left in the heap and skipped when it reaches the top: removal from the middle is not needed.
    found.entry.withdrawn = true;
    this.waiting -= 1;
    this.prune(found.flow);
    return found.entry.item;
  }

  /** What take() would return now, without taking it. */
  peek(now: number): T | undefined {
    return this.choose(now)?.heap.peek()?.item;
  }

  take(now: number, idOf: (item: T) => string): T | undefined {
    const flow = this.choose(now);
    const entry = flow?.heap.pop();
    if (!flow || !entry) return undefined;
    this.byId.delete(idOf(entry.item));
    this.waiting -= 1;
    flow.inFlight += 1;
    flow.lastTaken = ++this.takes;
    this.prune(flow);
    return entry.item;
  }

  /** Work taken from `key` has finished (answered, failed or withdrawn after it was taken). */
  finished(key: string): void {
    const flow = this.flows.get(key);
    if (!flow || flow.inFlight === 0) return;
    flow.inFlight -= 1;
    this.prune(flow);
  }

  private choose(now: number): Flow<T> | undefined {
    let best: Flow<T> | undefined;
    let bestLevel = Number.POSITIVE_INFINITY;
    for (const flow of this.flows.values()) {
      const head = this.head(flow);
      if (!head) continue;
      const level = urgencyLevel(head.deadline, now, this.urgencyUnitMs);
      if (
        !best ||
        level < bestLevel ||
        (level === bestLevel && (flow.inFlight < best.inFlight || (flow.inFlight === best.inFlight && flow.lastTaken < best.lastTaken)))
      ) {
        best = flow;
        bestLevel = level;
      }
    }
    return best;
  }

  private head(flow: Flow<T>): Entry<T> | undefined {
    while (flow.heap.peek()?.withdrawn) flow.heap.pop();
    return flow.heap.peek();
  }

  private flow(key: string): Flow<T> {
    let flow = this.flows.get(key);
    if (!flow) {
      flow = { key, heap: new BinaryHeap<Entry<T>>((a, b) => a.deadline < b.deadline || (a.deadline === b.deadline && a.seq < b.seq)), inFlight: 0, lastTaken: 0 };
      this.flows.set(key, flow);
    }
    return flow;
  }

  /** Forgets a key with nothing waiting or in flight, so finished jobs do not accumulate. */
  private prune(flow: Flow<T>): void {
    if (flow.inFlight === 0 && !this.head(flow)) this.flows.delete(flow.key);
  }
}
