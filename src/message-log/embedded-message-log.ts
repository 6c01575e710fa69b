import {
  type ConsumeOptions,
  type Consumer,
  type DeliveredMessage,
  type MessageHandler,
  type MessageLog,
  type OutgoingMessage,
  type TopicSpec,
  handlerRetryDelay,
  partitionOf,
} from './message-log.js';
import { partitionKey } from './partition-key.js';
import { PartitionWindow } from './partition-window.js';

interface Stored {
  readonly key: string;
  readonly value: string;
  readonly headers: Readonly<Record<string, string>>;
}

/** One partition: its retained messages and the offset of the first of them. */
class Partition {
  firstOffset = 0;
  messages: Stored[] = [];
  private waiters: Array<() => void> = [];

  get endOffset(): number {
    return this.firstOffset + this.messages.length;
  }

  append(message: Stored): void {
    this.messages.push(message);
    this.wake();
  }

  at(offset: number): Stored | undefined {
    return offset >= this.firstOffset ? this.messages[offset - this.firstOffset] : undefined;
  }

  /** Drops messages below `offset`, a few hundred at a time, so that trimming stays cheap. */
  trimBelow(offset: number): void {
    const droppable = Math.min(offset - this.firstOffset, this.messages.length);
    if (droppable < 256) return;
    this.messages.splice(0, droppable);
    this.firstOffset += droppable;
  }

  /** Resolves at the next append or wake. */
  next(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }
}

class Slots {
  private free: number;
  private queue: Array<() => void> = [];
  constructor(size: number) {
    this.free = size;
  }
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.queue.push(resolve));
  }
  /** Whether someone waits for a slot. */
  get wanted(): boolean {
    return this.queue.length > 0;
  }
  release(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.free++;
  }
}

class Member implements Consumer {
  stopping = false;
  abandoned = false;
  readonly workers = new Set<PartitionWorker>();
  readonly slots: Slots;

  constructor(
    readonly group: Group,
    readonly options: ConsumeOptions,
    readonly handler: MessageHandler,
  ) {
    this.slots = new Slots(options.concurrency ?? 1);
  }

  async stop(): Promise<void> {
    if (this.stopping || this.abandoned) return;
    this.stopping = true;
    for (const worker of this.workers) worker.wake();
    await Promise.all([...this.workers].map((worker) => worker.done));
    this.group.leave(this);
  }

  async abandon(): Promise<void> {
    if (this.abandoned) return;
    this.abandoned = true;
    for (const worker of this.workers) worker.wake();
    this.group.leave(this);
  }
}

/**
 * Handles one partition for one member until the partition is revoked or the member stops: up to
 * `prefetch` messages at once, committing the contiguous prefix of finished ones.
 */
class PartitionWorker {
  revoked = false;
  readonly done: Promise<void>;
  private readonly running = new Set<Promise<void>>();
  /** The messages handed and which of them finished: what may be committed. */
  private readonly window = new PartitionWindow();
  /** Whether this worker holds one of the member's slots (a partition being consumed). */
  private holding = false;

  constructor(
    private readonly log: EmbeddedMessageLog,
    readonly member: Member,
    readonly topic: string,
    readonly partitionIndex: number,
    previous: PartitionWorker | undefined,
  ) {
    this.done = this.run(previous);
  }

  private get partition(): Partition {
    return this.log.partition(this.topic, this.partitionIndex);
  }

  private get active(): boolean {
    return !this.revoked && !this.member.stopping && !this.member.abandoned;
  }

  private get key(): string {
    return partitionKey(this.topic, this.partitionIndex);
  }

  wake(): void {
    this.partition.wake();
  }

  private async run(previous: PartitionWorker | undefined): Promise<void> {
    // As in Kafka, a partition changes hands only once its previous owner has finished and
    // committed, unless that owner is gone (then its uncommitted messages are delivered again).
    if (previous && !previous.member.abandoned) await previous.done;
    const prefetch = Math.max(1, this.member.options.prefetch ?? 1);
    let next = Math.max(this.member.group.committed.get(this.key) ?? 0, this.partition.firstOffset);
    try {
      while (this.active) {
        const partition = this.partition;
        // A partition holding a slot takes no new message while another partition waits for one,
        // so that partitions take turns as they do one message at a time.
        const mayTake = this.running.size < prefetch && !(this.running.size > 0 && this.member.slots.wanted);
        const stored = mayTake ? partition.at(next) : undefined;
        if (stored) {
          if (!this.holding) {
            await this.member.slots.acquire();
            this.holding = true;
            if (!this.active) break;
          }
          this.start({ topic: this.topic, partition: this.partitionIndex, offset: String(next), ...stored });
          next++;
          continue;
        }
        if (this.running.size === 0 && this.holding) {
          this.holding = false;
          this.member.slots.release();
          continue;
        }
        // The next append, a handler finishing, or the member leaving.
        await partition.next();
      }
      await Promise.all(this.running);
    } finally {
      if (this.holding) {
        this.holding = false;
        this.member.slots.release();
      }
    }
  }

  private start(message: DeliveredMessage): void {
    const offset = BigInt(message.offset);
    this.window.hand(offset);
    const work: Promise<void> = this.handle(message).then((handled) => {
      this.running.delete(work);
      if (handled && !this.member.abandoned && this.window.finish(offset)) void this.window.commit(this.commitTo);
      this.wake();
    });
    this.running.add(work);
  }

  /**
   * Commits in memory, at once. Only forward: a member joining the group at the latest offset may
   * have moved the group's offset past this worker's prefix.
   */
  private readonly commitTo = (offset: bigint): boolean => {
    const group = this.member.group;
    group.committed.set(this.key, Math.max(group.committed.get(this.key) ?? 0, Number(offset)));
    this.log.trim(this.topic, this.partitionIndex);
    return true;
  };

  /** Runs the handler until it succeeds; false if the member left or lost the partition meanwhile. */
  private async handle(message: DeliveredMessage): Promise<boolean> {
    let failures = 0;
    for (;;) {
      try {
        await this.member.handler(message);
        return true;
      } catch (error) {
        this.member.options.onError?.(error, message);
        if (!this.active) return false;
        await new Promise((resolve) => setTimeout(resolve, handlerRetryDelay(this.member.options, ++failures)));
        if (!this.active) return false;
      }
    }
  }
}

class Group {
  readonly committed = new Map<string, number>();
  readonly members: Member[] = [];
  /** Every topic the group ever consumed: its committed offsets hold back trimming. */
  readonly consumedTopics = new Set<string>();
  private readonly owners = new Map<string, PartitionWorker>();

  constructor(private readonly log: EmbeddedMessageLog) {}

  join(member: Member): void {
    this.members.push(member);
    for (const topic of member.options.topics) {
      this.consumedTopics.add(topic);
      if (member.options.startAt !== 'latest') continue;
      // As Kafka's offset reset to the latest: partitions the group has committed nothing on start at their end.
      for (let index = 0; index < this.log.partitionCount(topic); index++) {
        const key = partitionKey(topic, index);
        if (!this.committed.has(key)) this.committed.set(key, this.log.partition(topic, index).endOffset);
      }
    }
    this.rebalance();
  }

  leave(member: Member): void {
    const index = this.members.indexOf(member);
    if (index < 0) return;
    this.members.splice(index, 1);
    this.rebalance();
  }

  topics(): Set<string> {
    return new Set(this.members.flatMap((member) => member.options.topics));
  }

  /** Spreads every partition of the subscribed topics over the members, round robin. */
  rebalance(): void {
    for (const topic of this.topics()) {
      const members = this.members.filter((member) => member.options.topics.includes(topic));
      const count = this.log.partitionCount(topic);
      for (let index = 0; index < count; index++) {
        const key = partitionKey(topic, index);
        const owner = members.length > 0 ? members[index % members.length] : undefined;
        const current = this.owners.get(key);
        if (current && current.member === owner && !current.revoked) continue;
        if (current) {
          current.revoked = true;
          current.member.workers.delete(current);
          current.wake();
        }
        if (!owner) {
          this.owners.delete(key);
          continue;
        }
        const worker = new PartitionWorker(this.log, owner, topic, index, current);
        owner.workers.add(worker);
        this.owners.set(key, worker);
      }
    }
  }
}

/**
 * Messages a partition keeps once every group consuming it has committed them. Nothing outside the
 * process can read this log, and its groups join at the start, before anything is published: what
 * is kept is only memory. At 1,000 a partition it filled as a service aged (a million lines
 * through 5,000 batches ended about 10 MiB higher than at 64; bench/FINDINGS.md, 2026-11-29).
 */
const RETAINED_MESSAGES = 64;

/**
 * The message log inside one process: topics of partitions held in memory, consumer groups with
 * committed offsets, and the same delivery rules as Kafka (in order per partition, a partition per
 * member, redelivery of what was not committed). It lasts as long as the process; the relay that
 * feeds it starts from the beginning of the event log at every start, and processors are
 * idempotent, so nothing is lost by a restart. Like Kafka's retention, each partition keeps its
 * newest `retain` messages (RETAINED_MESSAGES unless told); older ones go once every group that
 * consumes the topic has committed them.
 */
export class EmbeddedMessageLog implements MessageLog {
  readonly kind = 'embedded';
  readonly description = 'embedded';
  private readonly topics = new Map<string, Partition[]>();
  private readonly groups = new Map<string, Group>();
  private closed = false;

  constructor(private readonly options: { defaultPartitions?: number; retain?: number } = {}) {}

  async ensureTopics(topics: readonly TopicSpec[]): Promise<void> {
    for (const spec of topics) this.createTopic(spec.topic, spec.partitions);
  }

  private createTopic(topic: string, partitions: number): Partition[] {
    let existing = this.topics.get(topic);
    if (!existing) {
      existing = Array.from({ length: Math.max(1, partitions) }, () => new Partition());
      this.topics.set(topic, existing);
      for (const group of this.groups.values()) if (group.topics().has(topic)) group.rebalance();
    }
    return existing;
  }

  partition(topic: string, index: number): Partition {
    return this.topics.get(topic)![index]!;
  }

  partitionCount(topic: string): number {
    return this.topics.get(topic)?.length ?? 0;
  }

  async publish(topic: string, messages: readonly OutgoingMessage[]): Promise<void> {
    if (this.closed) throw new Error('the message log is closed');
    const partitions = this.topics.get(topic) ?? this.createTopic(topic, this.options.defaultPartitions ?? 1);
    for (const message of messages) {
      partitions[partitionOf(message, partitions.length)]!.append({ key: message.key, value: message.value, headers: { ...message.headers } });
    }
    for (let index = 0; index < partitions.length; index++) this.trim(topic, index);
  }

  async consume(options: ConsumeOptions, handler: MessageHandler): Promise<Consumer> {
    if (this.closed) throw new Error('the message log is closed');
    for (const topic of options.topics) if (!this.topics.has(topic)) this.createTopic(topic, this.options.defaultPartitions ?? 1);
    let group = this.groups.get(options.groupId);
    if (!group) {
      group = new Group(this);
      this.groups.set(options.groupId, group);
    }
    const member = new Member(group, options, handler);
    group.join(member);
    return member;
  }

  /** Drops what every group consuming the topic has committed, beyond the newest `retain` messages. */
  trim(topic: string, index: number): void {
    const partition = this.partition(topic, index);
    let lowest = partition.endOffset;
    for (const group of this.groups.values()) {
      if (group.consumedTopics.has(topic)) lowest = Math.min(lowest, group.committed.get(partitionKey(topic, index)) ?? 0);
    }
    partition.trimBelow(Math.min(lowest, partition.endOffset - (this.options.retain ?? RETAINED_MESSAGES)));
  }

  async close(): Promise<void> {
    this.closed = true;
    const members = [...this.groups.values()].flatMap((group) => [...group.members]);
    await Promise.all(members.map((member) => member.stop()));
  }
}
