// The states commands decided on, kept between commands, so that the next command on a stream
// reads only the events after them.
import type { Decider } from '../domain/decider.js';
import { type StreamKind, streamKind } from '../domain/stream-names.js';

/**
 * The kinds of stream that many commands load one after another: a batch's (created, validated,
 * its chunks' ends, finalizing, finished: each a command that reads the whole stream first), a
 * job's (read by every batch created for it). Files are read once or twice in their lives, and
 * their states would only push these out.
 */
const KEPT_KINDS: ReadonlySet<StreamKind | undefined> = new Set<StreamKind | undefined>(['batch', 'job', 'account', 'weights']);

/** How many streams' states are kept: about a thousand batches moving at once, each a few hundred bytes. */
const CAPACITY = 1024;

interface Kept {
  readonly decider: object;
  readonly state: unknown;
  readonly revision: bigint;
}

/**
 * A stream's state as of a revision, kept by the stream's name, least recently used dropped first.
 *
 * A kept state is never trusted as the stream's current state: a load reads the events after its
 * revision (another process may have appended them) and folds them in, so this only saves reading
 * and folding what was read before. States are immutable (`evolve` makes a new one), so a kept
 * one cannot change under its holder. Only a state folded from the stream's own events is kept,
 * with the decider that folded it; a load with another decider reads the whole stream.
 */
export class StreamStates {
  private readonly kept = new Map<string, Kept>();

  constructor(private readonly capacity = CAPACITY) {}

  /** The state kept for this stream and decider, and the revision it is as of; undefined where none is. */
  get<State>(streamName: string, decider: Pick<Decider<unknown, State, never>, 'evolve'>): { state: State; revision: bigint } | undefined {
    const kept = this.kept.get(streamName);
    if (!kept || kept.decider !== decider) return undefined;
    // Used now: to the back of the line.
    this.kept.delete(streamName);
    this.kept.set(streamName, kept);
    return { state: kept.state as State, revision: kept.revision };
  }

  /** Keeps the stream's state as of `revision` (streams of the kinds worth keeping only). */
  keep<State>(streamName: string, decider: Pick<Decider<unknown, State, never>, 'evolve'>, state: State, revision: bigint): void {
    if (!KEPT_KINDS.has(streamKind(streamName))) return;
    const kept = this.kept.get(streamName);
    // A later revision only: two commands on one stream may finish out of order.
    if (kept && kept.decider === decider && kept.revision > revision) return;
    this.kept.delete(streamName);
    this.kept.set(streamName, { decider, state, revision });
    if (this.kept.size > this.capacity) this.kept.delete(this.kept.keys().next().value!);
  }

  get size(): number {
    return this.kept.size;
  }
}
