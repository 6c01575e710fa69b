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
  readonly group: Group;
  readonly heap: BinaryHeap<Entry<T>>;
  /** Taken and not yet finished. */
  inFlight: number;
  /** When it was last taken from, in take order; 0 never. */
  lastTaken: number;
}

/** The keys of one group (an account's jobs): slots are shared between groups first. */
interface Group {
  readonly name: string;
  /** Taken and not yet finished, over its keys. */
  inFlight: number;
  /** Its keys with work waiting or in flight. */
  flows: number;
}

/**
 * Work waiting per fairness key (a job), taken most urgent first, and among equally urgent keys
 * fairly. Keys may belong to a group (an account, where accounts are required): among equally
 * urgent keys the next slot goes to the group holding the fewest slots, then within it by the
 * rule below, so an account with eight jobs gets no more than one with one. A key given no group
 * is a group of its own.
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
  private readonly groups = new Map<string, Group>();
  private readonly byId = new Map<string, { entry: Entry<T>; flow: Flow<T> }>();
  private seq = 0;
  private takes = 0;
  private waiting = 0;

  constructor(private readonly urgencyUnitMs = 60_000) {}

  get size(): number {
    return this.waiting;
  }

  push(id: string, item: T, key: string, deadline: number | undefined, group?: string): void {
    const flow = this.flow(key, group);
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
    flow.group.inFlight += 1;
    flow.lastTaken = ++this.takes;
    this.prune(flow);
    return entry.item;
  }

  /** Work taken from `key` has finished (answered, failed or withdrawn after it was taken). */
  finished(key: string): void {
    const flow = this.flows.get(key);
    if (!flow || flow.inFlight === 0) return;
    flow.inFlight -= 1;
    flow.group.inFlight -= 1;
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
        (level === bestLevel &&
          (flow.group.inFlight < best.group.inFlight ||
            (flow.group.inFlight === best.group.inFlight && (flow.inFlight < best.inFlight || (flow.inFlight === best.inFlight && flow.lastTaken < best.lastTaken)))))
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

  private flow(key: string, groupName = key): Flow<T> {
    let flow = this.flows.get(key);
    if (!flow) {
      let group = this.groups.get(groupName);
      if (!group) this.groups.set(groupName, (group = { name: groupName, inFlight: 0, flows: 0 }));
      group.flows += 1;
      flow = { key, group, heap: new BinaryHeap<Entry<T>>((a, b) => a.deadline < b.deadline || (a.deadline === b.deadline && a.seq < b.seq)), inFlight: 0, lastTaken: 0 };
      this.flows.set(key, flow);
    }
    return flow;
  }

  /** Forgets a key with nothing waiting or in flight, and a group with no key left, so finished jobs do not accumulate. */
  private prune(flow: Flow<T>): void {
    if (flow.inFlight !== 0 || this.head(flow)) return;
    this.flows.delete(flow.key);
    flow.group.flows -= 1;
    if (flow.group.flows === 0) this.groups.delete(flow.group.name);
  }
}
