import { LEAST_URGENT, urgencyLevel } from '../../src/engine/scheduling/urgency.js';

/** A chunk of batch lines held by an inference processor, by how it is scheduled. */
export interface HeldChunk {
  /** Epoch ms its batch is due by; undefined: no deadline (background). */
  readonly deadline?: number;
  /** Its job: equally urgent jobs share the chunks run at once. */
  readonly fairnessKey: string;
}

export interface ChunkAdmissionSettings {
  /** Chunks reading lines at once (BATCH_PARALLEL_CHUNKS). */
  readonly parallel: number;
  /** The urgency scale's first step (see urgencyLevel). */
  readonly urgencyUnitMs?: number;
}

/**
 * Which held chunk to start next, or undefined to start none now. Pure.
 *
 * `reading` are the running chunks still reading lines to send; `draining` counts those that have
 * read their last line and wait only for answers already asked for. A chunk's place is given to
 * the next as soon as its lines are read, not once they are answered: chunks of one batch start
 * together and are of one size, so they would otherwise end together, and the engine would run
 * short of lines while a whole wave of them waited for its last answers and the next wave started
 * (dips of a fifth of the engine's slots every few seconds on the Kafka shape). Reading and
 * draining chunks together stay below twice `parallel`, so chunks smaller than the lines they keep
 * waiting (whose lines are all read at once) do not all start together; only a chunk more urgent
 * than every running one passes that bound (reading chunks alone staying below twice `parallel`),
 * so draining loose chunks never hold a tight batch back.
 *
 * Chunks read up to `parallel` at once. The next is the most urgent (its batch's deadline, on the
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
export function nextChunk(held: readonly HeldChunk[], reading: readonly HeldChunk[], now: number, settings: ChunkAdmissionSettings, draining: readonly HeldChunk[] = []): number | undefined {
  if (held.length === 0 || reading.length >= 2 * settings.parallel) return undefined;
  const full = reading.length + draining.length >= 2 * settings.parallel;
  const level = (chunk: HeldChunk) => (chunk.deadline === undefined ? LEAST_URGENT : urgencyLevel(chunk.deadline, now, settings.urgencyUnitMs));
  const readingPerKey = new Map<string, number>();
  for (const chunk of reading) readingPerKey.set(chunk.fairnessKey, (readingPerKey.get(chunk.fairnessKey) ?? 0) + 1);
  let best = 0;
  for (let index = 1; index < held.length; index++) {
    const candidate = held[index]!;
    const current = held[best]!;
    const byLevel = level(candidate) - level(current);
    const byShare = (readingPerKey.get(candidate.fairnessKey) ?? 0) - (readingPerKey.get(current.fairnessKey) ?? 0);
    if (byLevel < 0 || (byLevel === 0 && byShare < 0)) best = index;
  }
  if (reading.length < settings.parallel && !full) return best;
  const chosen = held[best]!;
  const chosenLevel = level(chosen);
  if (chosenLevel < Math.max(...reading.map(level), ...draining.map(level))) return best;
  if (full || reading.some((chunk) => level(chunk) < chosenLevel)) return undefined;
  const jobs = new Set([...held, ...reading].filter((chunk) => level(chunk) === chosenLevel).map((chunk) => chunk.fairnessKey));
  const share = Math.max(1, Math.floor(settings.parallel / jobs.size));
  return (readingPerKey.get(chosen.fairnessKey) ?? 0) < share ? best : undefined;
}

/** A chunk's place among the running ones. */
export interface ChunkPlace {
  /** Its last line is read: its place to read lines goes to the next chunk; it still counts as draining. */
  linesRead(): void;
  /** It is over (answered, recorded, or given up). Idempotent; also ends `linesRead`'s share. */
  release(): void;
}

/** The chunks an inference processor holds, started by nextChunk as others read their lines or finish. */
export class ChunkAdmission {
  private readonly held: Array<{ readonly chunk: HeldChunk; start(running: HeldChunk): void; drop(reason: Error): void }> = [];
  private readonly reading: HeldChunk[] = [];
  private readonly draining: HeldChunk[] = [];

  constructor(
    private readonly settings: ChunkAdmissionSettings,
    private readonly now: () => number = Date.now,
  ) {}

  /** Resolves once the chunk may start, with its place: tell it when the lines are read and when the chunk is over. */
  async admit(chunk: HeldChunk): Promise<ChunkPlace> {
    const entry = await new Promise<HeldChunk>((resolve, reject) => {
      this.held.push({ chunk, start: resolve, drop: reject });
      this.startWhatMay();
    });
    let state: 'reading' | 'draining' | 'over' = 'reading';
    return {
      linesRead: () => {
        if (state !== 'reading') return;
        state = 'draining';
        this.reading.splice(this.reading.indexOf(entry), 1);
        this.draining.push(entry);
        this.startWhatMay();
      },
      release: () => {
        if (state === 'over') return;
        const list = state === 'reading' ? this.reading : this.draining;
        list.splice(list.indexOf(entry), 1);
        state = 'over';
        this.startWhatMay();
      },
    };
  }

  /** Every chunk still waiting to start is given up: its admit() rejects with `reason`. */
  dropHeld(reason: Error): void {
    for (const entry of this.held.splice(0)) entry.drop(reason);
  }

  /** Chunks waiting to start, running (reading lines or draining), and of those draining. */
  get counts(): { held: number; running: number; draining: number } {
    return { held: this.held.length, running: this.reading.length + this.draining.length, draining: this.draining.length };
  }

  private startWhatMay(): void {
    for (;;) {
      const index = nextChunk(
        this.held.map((entry) => entry.chunk),
        this.reading,
        this.now(),
        this.settings,
        this.draining,
      );
      if (index === undefined) return;
      const [chosen] = this.held.splice(index, 1);
      // A started chunk counts as running from now, though its admit() resumes a tick later.
      const running = { ...chosen!.chunk };
      this.reading.push(running);
      chosen!.start(running);
    }
  }
}
