import type Database from 'better-sqlite3';
import type { Logger } from 'pino';
import {
  type EventStore,
  type Position,
  type RecordedEvent,
  type Subscription,
  comparePositions,
  positionFromString,
  positionToString,
} from '../src/event-store/event-store.js';
import { type Projection, applyEvents } from './projection.js';
import { type StreamKind, streamKind } from '../src/domain/stream-names.js';
import { statement } from './read-model-store.js';
import { type StorageSpace, isOutOfSpace } from '../src/platform/storage-space.js';

/** How long a read-model write that found no room waits before it is tried again. */
const ROOM_RETRY_MS = 500;

export class ProjectionTimeoutError extends Error {
  override readonly name = 'ProjectionTimeoutError';
}

/**
 * Another process sharing this read-model file rebuilt a read model at a version this one does not
 * write: processes of different releases cannot share a data directory. This projector stops (the
 * process turns unready) rather than apply its events to a table of another shape.
 */
export class ReadModelVersionError extends Error {
  override readonly name = 'ReadModelVersionError';
}

interface Waiter {
  position: Position;
  resolve: () => void;
}

/**
 * Feeds the read models from a catch-up subscription to the whole log. Each batch of events and
 * the checkpoints it moves commit in one SQLite transaction, so a read model never holds an event
 * twice or misses one, whenever the process stops. Projections keep their own checkpoints; the
 * subscription starts at the oldest, so a new or rebuilt projection catches up beside the others.
 */
export class Projector {
  private readonly checkpoints = new Map<string, Position | undefined>();
  private subscription: Subscription | undefined;
  private waiters: Waiter[] = [];
  private position: Position | undefined;
  private headAtStart: Position | undefined;
  private caughtUp = false;
  private failure: Error | undefined;
  private readonly listeners: Array<(events: readonly RecordedEvent[]) => void> = [];
  private caughtUpWaiters: Array<() => void> = [];
  /** Events applied since start, counted once per event whatever the number of projections. */
  eventsApplied = 0;
  /** Events applied since start per kind of stream: a query cache over one kind is stale once its count moves. */
  private readonly appliedByKind = new Map<StreamKind, number>();

  private stopping = false;

  constructor(
    private readonly store: EventStore,
    private readonly db: Database.Database,
    private readonly projections: readonly Projection[],
    private readonly log: Pick<Logger, 'info' | 'error'>,
    /** Told whether the read models' writes find room; one that finds none is tried again. */
    private readonly storage?: Pick<StorageSpace, 'refused' | 'wrote'>,
  ) {}

  async start(): Promise<void> {
    this.prepareReadModels();
    const from = this.oldestCheckpoint();
    this.position = from;
    this.headAtStart = await this.store.headPosition();
    this.updateCaughtUp();
    this.log.info(
      { from: from ? positionToString(from) : 'start', head: this.headAtStart ? positionToString(this.headAtStart) : 'empty' },
      'projections starting',
    );
    this.subscription = this.store.subscribeToAll(from ? { after: from } : {}, (events) => this.applyBatch(events));
    this.subscription.done.catch((error: Error) => {
      if (this.stopping) return;
      this.failure = error;
      this.log.error({ err: error }, 'projections stopped: a read model could not apply an event');
    });
  }

  /** Where the subscription starts: the oldest checkpoint; the log's start if any read model has none. */
  private oldestCheckpoint(): Position | undefined {
    let oldest: Position | undefined;
    for (const checkpoint of this.checkpoints.values()) {
      if (checkpoint === undefined) return undefined;
      if (!oldest || comparePositions(checkpoint, oldest) < 0) oldest = checkpoint;
    }
    return oldest;
  }

  /** Creates missing read models and drops those whose version changed, so they rebuild. */
  private prepareReadModels(): void {
    const select = this.db.prepare<[string], { version: number; position: string | null }>(
      'SELECT version, position FROM projection_checkpoints WHERE name = ?',
    );
    const upsert = this.db.prepare(
      'INSERT INTO projection_checkpoints (name, version, position) VALUES (?, ?, NULL) ON CONFLICT (name) DO UPDATE SET version = excluded.version, position = NULL',
    );
    this.db.transaction(() => {
      for (const projection of this.projections) {
        const stored = select.get(projection.name);
        if (stored && stored.version === projection.version) {
          projection.create(this.db);
          this.checkpoints.set(projection.name, stored.position === null ? undefined : positionFromString(stored.position));
          continue;
        }
        if (stored) this.log.info({ projection: projection.name, from: stored.version, to: projection.version }, 'rebuilding read model');
        projection.drop(this.db);
        projection.create(this.db);
        upsert.run(projection.name, projection.version);
        this.checkpoints.set(projection.name, undefined);
      }
      // Immediate, as applyBatch: two processes starting at once on one file make each read model once.
    }).immediate();
  }

  private async applyBatch(events: readonly RecordedEvent[]): Promise<void> {
    const last = events[events.length - 1];
    if (!last) return;
    const held = statement(this.db, 'SELECT name, version, position FROM projection_checkpoints');
    const save = statement(this.db, 'UPDATE projection_checkpoints SET position = ? WHERE name = ?');
    const lastText = positionToString(last.position);
    const reached = new Map<string, Position>();
    const apply = this.db.transaction(() => {
      // What the file holds decides which events a read model still needs, not what this process
      // applied: processes on one host may share a data directory, and with it this file, each
      // projecting the whole log; another may have applied some or all of the page already.
      const stored = new Map((held.all() as Array<{ name: string; version: number; position: string | null }>).map((row) => [row.name, row]));
      reached.clear();
      // Read models are apart from each other: each takes the page's events it has not seen, in order.
      for (const projection of this.projections) {
        const row = stored.get(projection.name);
        if (row && row.version !== projection.version) {
          throw new ReadModelVersionError(
            `read model ${projection.name} in this data directory is at version ${row.version}, made by another process of another release; this one writes version ${projection.version}: processes sharing a data directory must run one release`,
          );
        }
        const text = row?.position ?? null;
        const checkpoint = text === null ? undefined : positionFromString(text);
        if (checkpoint !== undefined && comparePositions(last.position, checkpoint) <= 0) {
          reached.set(projection.name, checkpoint);
          continue;
        }
        // Mostly the whole page is new to every read model: no copy is made then.
        const seen = checkpoint !== undefined && comparePositions(events[0]!.position, checkpoint) <= 0;
        applyEvents(projection, this.db, seen ? events.filter((event) => comparePositions(event.position, checkpoint) > 0) : events);
        save.run(lastText, projection.name);
        reached.set(projection.name, last.position);
      }
    });
    // Immediate: the write lock is taken before the checkpoints are read, so no other process
    // applies the same events between that read and this transaction's writes.
    await this.whenThereIsRoom(() => apply.immediate());
    for (const [name, position] of reached) this.checkpoints.set(name, position);
    this.eventsApplied += events.length;
    for (const event of events) {
      const kind = streamKind(event.streamName);
      if (kind) this.appliedByKind.set(kind, (this.appliedByKind.get(kind) ?? 0) + 1);
    }
    this.position = last.position;
    this.updateCaughtUp();
    this.releaseWaiters();
    for (const listener of [...this.listeners]) listener(events);
  }

  /**
   * Runs a read-model transaction. One refused for lack of space left nothing behind, so it is run
   * again every ROOM_RETRY_MS until it goes through (the read models resume where they were once
   * space is freed) or the projector stops; any other failure stops the projections, as before.
   */
  private async whenThereIsRoom(transaction: () => void): Promise<void> {
    for (;;) {
      try {
        transaction();
        this.storage?.wrote();
        return;
      } catch (error) {
        if (this.stopping || !isOutOfSpace(error)) throw error;
        this.storage?.refused(error, 'read models');
        await new Promise((resolve) => setTimeout(resolve, ROOM_RETRY_MS));
      }
    }
  }

  /** How many events of streams of this kind the read models took since start. */
  appliedCount(kind: StreamKind): number {
    return this.appliedByKind.get(kind) ?? 0;
  }

  /**
   * Called after each batch of events is in the read models (processors react to changes).
   * Returns what stops the calls: a listener that lives shorter than the projector (an HTTP
   * stream) must let go, or it leaks.
   */
  onApplied(listener: (events: readonly RecordedEvent[]) => void): () => void {
    this.listeners.push(listener);
    return () => {
      const index = this.listeners.indexOf(listener);
      if (index >= 0) this.listeners.splice(index, 1);
    };
  }

  /** How many listeners are called after each batch (to see that none leaks). */
  get listenerCount(): number {
    return this.listeners.length;
  }

  private updateCaughtUp(): void {
    if (this.caughtUp) return;
    this.caughtUp = this.headAtStart === undefined || (this.position !== undefined && comparePositions(this.position, this.headAtStart) >= 0);
    if (!this.caughtUp) return;
    this.log.info({ position: this.position ? positionToString(this.position) : 'start' }, 'projections caught up');
    for (const resolve of this.caughtUpWaiters) resolve();
    this.caughtUpWaiters = [];
  }

  /** Resolves once the read models hold the log as it was when the projector started. */
  /** Each projection's checkpoint: it holds every event up to there. */
  checkpointsByProjection(): Array<{ projection: string; position: Position | undefined }> {
    return [...this.checkpoints].map(([projection, position]) => ({ projection, position }));
  }

  whenCaughtUp(): Promise<void> {
    if (this.caughtUp) return Promise.resolve();
    return new Promise((resolve) => this.caughtUpWaiters.push(resolve));
  }

  private releaseWaiters(): void {
    const current = this.position;
    if (!current) return;
    const still: Waiter[] = [];
    for (const waiter of this.waiters) {
      if (comparePositions(waiter.position, current) <= 0) waiter.resolve();
      else still.push(waiter);
    }
    this.waiters = still;
  }

  /** Whether every read model holds the event at `position`. */
  reached(position: Position): boolean {
    return this.position !== undefined && comparePositions(position, this.position) <= 0;
  }

  /** Resolves once every read model holds the event at `position` (read-your-writes). */
  waitFor(position: Position, timeoutMs = 10_000): Promise<void> {
    if (this.reached(position)) return Promise.resolve();
    // The log holds the event (whoever asks learned of it from a message): read it now, not at the
    // next poll, which on a log shared by processes is up to its interval away.
    this.subscription?.wake();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((waiter) => waiter !== entry);
        reject(new ProjectionTimeoutError(`read models did not reach ${positionToString(position)} within ${timeoutMs} ms`));
      }, timeoutMs);
      const entry: Waiter = {
        position,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.waiters.push(entry);
    });
  }

  status(): { caughtUp: boolean; failed: string | undefined; position: string | undefined } {
    return {
      caughtUp: this.caughtUp && !this.failure,
      failed: this.failure?.message,
      position: this.position ? positionToString(this.position) : undefined,
    };
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.subscription?.stop();
    this.subscription = undefined;
  }
}
