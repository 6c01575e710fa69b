import { join } from 'node:path';
import type { Logger } from 'pino';
import type { WeightSync } from '../../src/application/weight-sync.js';
import type { Clock } from '../../src/platform/clock.js';
import { hotSwapDifferences, rejectionReasons } from '../../src/domain/checkpoint-compatibility.js';
import { parseCheckpointLocation } from '../../src/domain/weight-sync.js';
import type { S3CheckpointSource } from '../../src/engine/checkpoint-source.js';
import type { Fleet } from '../../src/engine/fleet.js';
import type { ReplicaPool } from '../../src/engine/replica-pool.js';
import { deterministicUuid } from '../../src/domain/derived-ids.js';
import type { WeightSyncRow, WeightsQueries } from '../../projections/weights-projection.js';
import { backoffDelay } from '../../src/platform/retry.js';
import { BUILTIN_KIND } from '../../src/engine/engine-kinds.js';
import type { Replica, StagedWeights } from '../../src/engine/replica.js';
import { type ReloadProbeSettings, probeReload } from './reload-probe.js';
import type { ServedWeights } from './served-weights.js';

const CORRELATION = { correlationId: 'weight-syncer' };

/** The longest a replica's running requests are waited for before its reload. */
const DRAIN_MS = 60_000;

/**
 * The checkpoint processor: takes a requested weight sync to the fleet serving the new weights.
 * Validates the checkpoint from its headers, stages it, and reloads it replica by replica,
 * recording each result through the WeightSync application service. Driven by the weights read
 * model like the batch pipeline: a restart picks every sync up where the log left it.
 */
export type WeightSyncStep = 'validate' | 'transfer' | 'reload';

export interface WeightSyncObserver {
  stepDone(step: WeightSyncStep, seconds: number): void;
  attemptFailed(step: 'upload' | 'reload'): void;
}

export class WeightSyncer {
  private readonly busy = new Set<string>();
  private readonly notBefore = new Map<string, number>();
  private stopped = false;
  private source: Promise<S3CheckpointSource> | undefined;

  private timed<T>(step: WeightSyncStep, work: () => Promise<T>): Promise<T> {
    const startedAt = performance.now();
    return work().finally(() => this.deps.observer?.stepDone(step, (performance.now() - startedAt) / 1000));
  }

  constructor(
    private readonly deps: {
      weightSync: WeightSync;
      queries: WeightsQueries;
      fleet: Fleet;
      /** What this process's built-in replicas serve: told of the reloads made here. */
      servedWeights: Pick<ServedWeights, 'servedHere'>;
      clock: Clock;
      log: Pick<Logger, 'info' | 'warn' | 'error'>;
      stagingDir: string;
      openSource: () => Promise<S3CheckpointSource>;
      /** Delay before a failed step's next attempt (doubled each time, without a cap: the third fails the sync). */
      retryDelayMs: number;
      /** Told how long each step took and of each failed attempt (for the metrics). */
      observer?: WeightSyncObserver;
      /** The request each replica must answer right after its reload (reload-probe.ts). */
      probe: ReloadProbeSettings;
    },
  ) {}

  /**
   * Takes the model's sync one step further if it is uploading or reloading: the checkpoint
   * processor calls this for every work message about the model. A step that failed is not
   * tried again before its backoff has passed.
   */
  async step(model: string): Promise<void> {
    if (this.stopped || this.busy.has(model)) return;
    const wait = (this.notBefore.get(model) ?? 0) - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const row = this.deps.queries.get(model);
    if (this.stopped || !row || (row.state !== 'uploading' && row.state !== 'reloading') || this.busy.has(model)) return;
    this.busy.add(model);
    try {
      await (row.state === 'uploading' ? this.upload(row) : this.reload(row));
    } finally {
      this.busy.delete(model);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    while (this.busy.size > 0) await new Promise((resolve) => setTimeout(resolve, 20));
  }

  private async failAttempt(row: WeightSyncRow, step: 'upload' | 'reload', error: unknown): Promise<void> {
    const message = error instanceof Error ? error.message : String(error);
    this.deps.log.warn({ model: row.model, step, err: error }, 'weight sync attempt failed');
    this.deps.observer?.attemptFailed(step);
    this.notBefore.set(row.model, Date.now() + backoffDelay({ firstMs: this.deps.retryDelayMs }, row.attempt + 1));
    await this.deps.weightSync.record(row.model, { type: 'RecordAttemptFailed', syncId: row.sync_id!, step, error: message, at: this.deps.clock.nowSeconds() }, CORRELATION);
  }

  private async upload(row: WeightSyncRow): Promise<void> {
    const location = parseCheckpointLocation(row.location ?? '');
    const pool = this.deps.fleet.engineFor(row.model);
    if (!location || !pool || !row.sync_id) return;
    const syncId = row.sync_id;
    try {
      this.source ??= this.deps.openSource();
      const source = await this.source;
      const checked = await this.timed('validate', async () => {
        const remote = await source.describe(location.bucket, location.prefix);
        const state = await this.deps.weightSync.state(row.model);
        const serving = servingManifest(pool) ?? state.serving ?? undefined;
        return { remote, reasons: serving ? rejectionReasons(hotSwapDifferences(serving, remote.manifest)) : [] };
      });
      const { remote, reasons } = checked;
      if (reasons.length > 0) {
        await this.deps.weightSync.record(row.model, { type: 'RecordRejected', syncId, differences: reasons, at: this.deps.clock.nowSeconds() }, CORRELATION);
        return;
      }
      await this.deps.weightSync.record(row.model, { type: 'RecordValidated', syncId, shards: remote.files, manifest: remote.manifest, at: this.deps.clock.nowSeconds() }, CORRELATION);
      const path = join(this.deps.stagingDir, row.model.replace(/[^A-Za-z0-9._-]/g, '_'), syncId);
      const files = await this.timed('transfer', () => source.transfer(location.bucket, location.prefix, remote.files, path));
      await this.deps.weightSync.record(row.model, { type: 'RecordStaged', staged: { sync_id: syncId, location: row.location!, path, files, staged_at: this.deps.clock.nowSeconds() } }, CORRELATION);
      this.deps.log.info({ model: row.model, sync_id: syncId, files: files.length }, 'checkpoint staged');
    } catch (error) {
      if (error instanceof Error && error.name === 'InvalidCheckpointError') {
        const detail = (error as { detail?: string }).detail;
        if (detail) this.deps.log.warn({ model: row.model, sync_id: syncId, reason: detail }, 'checkpoint could not be read');
        await this.deps.weightSync.record(row.model, { type: 'RecordRejected', syncId, differences: [error.message], at: this.deps.clock.nowSeconds() }, CORRELATION);
        return;
      }
      await this.failAttempt(row, 'upload', error);
    }
  }

  private async reload(row: WeightSyncRow): Promise<void> {
    await this.timed('reload', () => this.reloadReplicas(row));
  }

  private async reloadReplicas(row: WeightSyncRow): Promise<void> {
    const pool = this.deps.fleet.engineFor(row.model);
    if (!pool || !row.sync_id) return;
    const syncId = row.sync_id;
    const state = await this.deps.weightSync.state(row.model);
    if (!state.staged) return;
    const staged = { path: state.staged.path, location: state.staged.location, syncId };
    // What each replica served before this attempt, to go back to if the new weights fail on one.
    const reloaded: Array<{ replica: Replica; before: StagedWeights | undefined }> = [];
    try {
      // Rolling: one replica at a time, so the others serve while it swaps. A replica is held out
      // of the scheduling from its reload until its probe passed: no request but the probe meets
      // weights that have not been checked. Requests running on it finish on the old weights.
      for (const replica of pool.replicas) {
        const before = weightsBefore(replica, row);
        pool.withhold(replica.id);
        try {
          // What it runs finishes first (a server's held-ahead batch lines too): nothing sent before
          // the reload is answered by weights not yet checked. A built-in replica would finish it on
          // the old weights anyway; vLLM's pause waits likewise, SGLang's reload does not.
          if (!(await pool.drained(replica.id, DRAIN_MS))) this.deps.log.warn({ model: row.model, replica: replica.id, seconds: DRAIN_MS / 1000 }, 'requests still running on a replica about to reload');
          await replica.reload(staged);
          reloaded.push({ replica, before });
          const problem = await probeReload(replica, row.model, staged, this.deps.probe);
          if (problem) throw new ReloadProbeFailed(`${replica.id}: ${problem}`);
        } catch (error) {
          await this.rollBack(pool, row, reloaded, error);
          throw error;
        }
        pool.release(replica.id);
        if (replica.weightsInProcess) this.deps.servedWeights.servedHere(row.model, staged.path);
        await this.deps.weightSync.record(row.model, { type: 'RecordReplicaReloaded', syncId, replica: replica.id, at: this.deps.clock.nowSeconds() }, CORRELATION, () => deterministicUuid(`${syncId}/replica/${replica.id}`));
      }
      // Ready only once a request through the normal inference path is answered.
      const probe = await pool.infer({ endpoint: '/v1/chat/completions', body: { model: row.model, messages: [{ role: 'user', content: 'ping' }], max_tokens: 1 } });
      if (probe.statusCode >= 400) throw new Error(`the test request after the swap was answered ${probe.statusCode}`);
      await this.deps.weightSync.record(row.model, { type: 'RecordReloaded', syncId, at: this.deps.clock.nowSeconds() }, CORRELATION);
      this.deps.log.info({ model: row.model, sync_id: syncId, location: staged.location }, 'weights reloaded');
    } catch (error) {
      await this.failAttempt(row, 'reload', error);
    }
  }

  /**
   * Puts every replica this attempt reloaded back on the weights it served before, and into the
   * scheduling again. A server whose earlier weights Spool does not know (no sync reloaded it
   * before) cannot be put back: it stays held out, so that no request meets weights that failed
   * their probe, until a later sync's reload passes (the log says so).
   */
  private async rollBack(pool: ReplicaPool, row: WeightSyncRow, reloaded: ReadonlyArray<{ replica: Replica; before: StagedWeights | undefined }>, cause: unknown): Promise<void> {
    for (const { replica, before } of reloaded) {
      if (!before) {
        this.deps.log.error({ model: row.model, replica: replica.id, err: cause }, 'new weights failed on a replica whose earlier weights are unknown: it stays out of service until a reload passes its probe');
        continue;
      }
      try {
        await replica.reload(before);
        if (replica.weightsInProcess) this.deps.servedWeights.servedHere(row.model, before.path);
        pool.release(replica.id);
        this.deps.log.warn({ model: row.model, replica: replica.id, restored: before.location, err: cause }, 'new weights failed their probe: the replica is back on its earlier weights');
      } catch (error) {
        this.deps.log.error({ model: row.model, replica: replica.id, err: error }, 'could not put a replica back on its earlier weights: it stays out of service until a reload passes its probe');
      }
    }
    // The replica that failed before its reload took (the reload itself threw) never changed.
    for (const replica of pool.replicas) if (!reloaded.some((entry) => entry.replica === replica) && pool.isWithheld(replica.id)) pool.release(replica.id);
  }
}

/** A reloaded replica answered its probe wrongly, or not at all. */
class ReloadProbeFailed extends Error {
  override readonly name = 'ReloadProbeFailed';
}

/**
 * The weights a replica serves now, as a reload could bring them back: the last sync's (the model's
 * serving weights) where one reloaded it, else a built-in replica's own checkpoint folder; a
 * server's first weights are its own, unknown here.
 */
function weightsBefore(replica: Replica, row: WeightSyncRow): StagedWeights | undefined {
  if (row.serving_path) return { path: row.serving_path, location: row.serving_location ?? row.serving_path, ...(row.serving_sync_id ? { syncId: row.serving_sync_id } : {}) };
  if (replica.kind === BUILTIN_KIND) return { path: replica.servedCheckpoint, location: replica.servedCheckpoint };
  return undefined;
}

/**
 * What the model's built-in replicas serve, as a manifest; undefined when none is built-in (then
 * the manifest of the last checkpoint synced onto the model is the reference, if there is one).
 */
function servingManifest(pool: ReplicaPool) {
  return pool.replicas.find((replica) => replica.servedManifest)?.servedManifest;
}
