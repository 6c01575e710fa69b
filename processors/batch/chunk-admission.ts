import { LEAST_URGENT, urgencyLevel } from '../../src/engine/scheduling/urgency.js';

/** A chunk of batch lines held by an inference processor, by how it is scheduled. */
export interface HeldChunk {
  /** Epoch ms its batch is due by; undefined: no deadline (background). */
  readonly deadline?: number;
  /** Its job: equally urgent jobs share the chunks run at once. */
  readonly fairnessKey: string;
}

export interface ChunkAdmissionSettings {
  /** Chunks run at once (BATCH_PARALLEL_CHUNKS). */
  readonly parallel: number;
  /** The urgency scale's first step (see urgencyLevel). */
  readonly urgencyUnitMs?: number;
}

/**
 * Which held chunk to start next, or undefined to start none now. Pure.
 *
 * Chunks run up to `parallel` at once. The next is the most urgent (its batch's deadline, on the
 * scheduler's urgency scale), equally urgent ones going to the job with the fewest chunks
 * running, then in arrival order. Past `parallel` (up to twice it) a chunk still starts when:
 * - it is more urgent than every chunk running: a tight batch created behind a loose one must
 *   not wait for the loose chunks ahead of it to finish, and the engines' scheduler then puts
 *   its lines first;
 * - its job runs fewer chunks than its share of `parallel` among the jobs of its urgency that
 *   have chunks here: a job arriving while another fills every place would otherwise wait for
 *   one of those chunks to end (a chunk's lines are served in order, so the first ends only
 *   after a whole chunk's time), and with one chunk at a time it would run dry between chunks.
 *   Lines are shared between jobs by the fleet scheduler; this gives each job lines to share.
 */
export function nextChunk(held: readonly HeldChunk[], running: readonly HeldChunk[], now: number, settings: ChunkAdmissionSettings): number | undefined {
  if (held.length === 0 || running.length >= 2 * settings.parallel) return undefined;
  // Each chunk's level and each job's running count are worked out once per call, with nothing
  // copied: it runs at every chunk's start and end, over every chunk held (hundreds, when many small
  // batches arrive at once).
  const level = (chunk: HeldChunk) => (chunk.deadline === undefined ? LEAST_URGENT : urgencyLevel(chunk.deadline, now, settings.urgencyUnitMs));
  const runningPerKey = new Map<string, number>();
  let mostRunningLevel = -Infinity;
  let leastRunningLevel = Infinity;
  for (const chunk of running) {
    runningPerKey.set(chunk.fairnessKey, (runningPerKey.get(chunk.fairnessKey) ?? 0) + 1);
    const at = level(chunk);
    if (at > mostRunningLevel) mostRunningLevel = at;
    if (at < leastRunningLevel) leastRunningLevel = at;
  }
  let best = 0;
  let bestLevel = level(held[0]!);
  let bestRunning = runningPerKey.get(held[0]!.fairnessKey) ?? 0;
  for (let index = 1; index < held.length; index++) {
    const candidate = held[index]!;
    const candidateLevel = level(candidate);
    if (candidateLevel > bestLevel) continue;
    const candidateRunning = runningPerKey.get(candidate.fairnessKey) ?? 0;
    if (candidateLevel < bestLevel || candidateRunning < bestRunning) {
      best = index;
      bestLevel = candidateLevel;
      bestRunning = candidateRunning;
    }
  }
  if (running.length < settings.parallel) return best;
  if (bestLevel < mostRunningLevel) return best;
  if (leastRunningLevel < bestLevel) return undefined;
  const jobs = new Set<string>();
  for (const chunk of held) if (level(chunk) === bestLevel) jobs.add(chunk.fairnessKey);
  for (const chunk of running) if (level(chunk) === bestLevel) jobs.add(chunk.fairnessKey);
  const share = Math.max(1, Math.floor(settings.parallel / jobs.size));
  return bestRunning < share ? best : undefined;
}

/** The chunks an inference processor holds, started by nextChunk as others finish. */
export class ChunkAdmission {
  private readonly held: Array<{ readonly chunk: HeldChunk; start(running: HeldChunk): void; drop(reason: Error): void }> = [];
  /** The held entries' chunks, in the same order: what nextChunk reads, kept rather than made at each call. */
  private readonly heldChunks: HeldChunk[] = [];
  private readonly running: HeldChunk[] = [];

  constructor(
    private readonly settings: ChunkAdmissionSettings,
    private readonly now: () => number = Date.now,
  ) {}

  /** Resolves once the chunk may start; call the returned release when it is over. */
  async admit(chunk: HeldChunk): Promise<() => void> {
    const entry = await new Promise<HeldChunk>((resolve, reject) => {
      this.held.push({ chunk, start: resolve, drop: reject });
      this.heldChunks.push(chunk);
      this.startWhatMay();
    });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running.splice(this.running.indexOf(entry), 1);
      this.startWhatMay();
    };
  }

  /** Every chunk still waiting to start is given up: its admit() rejects with `reason`. */
  dropHeld(reason: Error): void {
    this.heldChunks.length = 0;
    for (const entry of this.held.splice(0)) entry.drop(reason);
  }

  /** Chunks waiting to start, and running. */
  get counts(): { held: number; running: number } {
    return { held: this.held.length, running: this.running.length };
  }

  private startWhatMay(): void {
    for (;;) {
      const index = nextChunk(this.heldChunks, this.running, this.now(), this.settings);
      if (index === undefined) return;
      const [chosen] = this.held.splice(index, 1);
      this.heldChunks.splice(index, 1);
      // A started chunk counts as running from now, though its admit() resumes a tick later.
      const running = { ...chosen!.chunk };
      this.running.push(running);
      chosen!.start(running);
    }
  }
}
