import type { CheckpointManifest } from '../domain/checkpoint-compatibility.js';
import type { BuiltinEngine, TextDelta } from './builtin/builtin-engine.js';
import { loadCheckpoint } from './builtin/checkpoint.js';
import { Transformer } from './builtin/transformer.js';
import type { EngineRequest, EngineResponse } from './engine.js';
import { BUILTIN_KIND, type ReplicaKind } from './engine-kinds.js';
import type { EngineLoad } from './engine-load-metrics.js';
import type { ServiceClass } from './scheduling/urgency.js';

/** A checkpoint staged for a reload: the folder it is in, and where it was synced from. */
export interface StagedWeights {
  readonly path: string;
  readonly location: string;
  /** The weight sync that staged them. */
  readonly syncId?: string;
}

/** How urgent a request is, for replicas that schedule by priority. */
export interface Urgency {
  /** Absent: interactive (an EngineRequest's own fields, so the pool passes the request itself). */
  readonly serviceClass?: ServiceClass | undefined;
  /** Epoch ms; batch work only. */
  readonly deadline?: number;
}

/** A replica's answer, with what the pool learns from it beyond the answer itself. */
/** Hears how a request sent to a replica ended (Replica.sendTo): once. */
export interface ReplicaListener {
  answered(response: ReplicaResponse): void;
  failed(error: unknown): void;
}

export interface ReplicaResponse extends EngineResponse {
  /**
   * The engine's own time for the request, measured where the exchange runs (engine-io-thread.ts),
   * so without the time the answer then waits for this process's event loop. Absent: the pool
   * measures it around send().
   */
  readonly engineLatencyMs?: number;
  /** The engine's Retry-After on a 429 or 503, in ms. */
  readonly retryAfterMs?: number;
  /**
   * When a replica that holds requests (holdsRequests) actually sent it, epoch ms, with its
   * requests running then (itself included) and the limit then.
   */
  readonly sent?: { readonly at: number; readonly inFlight: number; readonly limit: number | undefined };
}

/** One server (or the in-process model) that serves a model. send() is a single attempt. */
export interface Replica {
  readonly id: string;
  readonly kind: ReplicaKind;
  readonly description: string;
  /** What it serves: a checkpoint folder or the s3:// location it was synced from; a server's base URL until a sync reloads it. */
  readonly servedCheckpoint: string;
  /** The weight sync whose reload put its weights there; undefined for the weights it started with. */
  readonly servedSyncId?: string | undefined;
  /** The served weights' manifest where this process holds them; undefined for a server. */
  readonly servedManifest: CheckpointManifest | undefined;
  /**
   * true: its weights live in this process, so every process serving it reloads it itself (and
   * restores the last reload after a restart). false: one reload of the server serves everyone.
   */
  readonly weightsInProcess: boolean;
  /**
   * true: send() may be given more requests than `ahead.limit` (the slots work that can wait may
   * use: the learned limit less the interactive reserve); the replica holds the extra ones and
   * sends each as soon as one of those ends, without the main event loop (HttpReplica: in the
   * engine I/O thread). Requests sent without `ahead` (interactive ones) go out at once and do
   * not count against it. A held request whose `withdraw()` turns true is not sent
   * (RequestWithdrawnError).
   */
  readonly holdsRequests: boolean;
  /**
   * true: its configured concurrency is exactly what it can use, and its pool keeps the limit there
   * rather than learning one: a model in this process that queues what it is sent and forms its own
   * runs from the queue (MiniLmReplica), where the queue is what keeps its threads busy between
   * runs and nothing behind it is shared with other processes. A throughput search reads such a
   * queue as waiting that buys nothing and walks the limit down to a run's worth, leaving the
   * model idle while the main loop turns its answers into the next requests.
   */
  readonly capacityKnown: boolean;
  /** Throws when there is no answer at all (connection refused, timeout). */
  send(request: EngineRequest, onDelta?: TextDelta, ahead?: { readonly limit: number }): Promise<ReplicaResponse>;
  /**
   * send() for a caller that listens rather than awaits, where the replica offers it: told once,
   * answered or failed (possibly before it returns); no promise a request. The response it tells
   * is made for this request alone: the listener may complete it (the pool sets `servedBy`).
   */
  sendTo?(request: EngineRequest, onDelta: TextDelta | undefined, ahead: { readonly limit: number } | undefined, listener: ReplicaListener): void;
  health(): Promise<boolean>;
  /** Serves the staged weights from now on; requests already running finish on the old ones. */
  reload(weights: StagedWeights): Promise<void>;
  /** Request body fields telling it how urgent a request is; undefined when it takes none. */
  priorityFields(urgency: Urgency, now: number): Record<string, unknown> | undefined;
  /** The server's own load gauges, where it publishes them. */
  load?(): Promise<EngineLoad | undefined>;
  /** What the operator should know of it (/ready's warnings): a model that could not be had, say. */
  warning?(): string | undefined;
}

// Replicas on one folder share its (read-only) weights: loaded once while any replica holds them.
const loadedWeights = new Map<string, WeakRef<Transformer>>();

/** The weights in a checkpoint folder, shared by every replica of this process that serves them. */
export function sharedWeights(path: string): Transformer {
  const held = loadedWeights.get(path)?.deref();
  if (held) return held;
  const weights = new Transformer(loadCheckpoint(path));
  loadedWeights.set(path, new WeakRef(weights));
  return weights;
}

/** The in-process built-in model as a replica. */
export class BuiltinReplica implements Replica {
  readonly kind = BUILTIN_KIND;
  readonly weightsInProcess = true;
  readonly holdsRequests = false;
  readonly capacityKnown = false;
  readonly description: string;
  constructor(
    readonly id: string,
    readonly engine: BuiltinEngine,
    private served: string,
  ) {
    this.description = `built-in ${engine.modelName}`;
  }

  get servedCheckpoint(): string {
    return this.served;
  }

  get servedManifest(): CheckpointManifest {
    return this.engine.manifest;
  }

  servedSyncId: string | undefined;

  async reload(weights: StagedWeights): Promise<void> {
    this.engine.swap(sharedWeights(weights.path));
    this.served = weights.location;
    this.servedSyncId = weights.syncId;
  }

  send(request: EngineRequest, onDelta?: TextDelta): Promise<EngineResponse> {
    return this.engine.infer(request, onDelta);
  }

  async health(): Promise<boolean> {
    return true;
  }

  // The built-in engine runs requests as they come; Spool's own scheduler orders them.
  priorityFields(): undefined {
    return undefined;
  }
}
