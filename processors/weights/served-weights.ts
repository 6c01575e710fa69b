import type { Logger } from 'pino';
import type { Fleet } from '../../src/engine/fleet.js';
import type { Projector } from '../../projections/projector.js';
import type { WeightsQueries } from '../../projections/weights-projection.js';

/**
 * Replicas whose weights live in this process serve what the last completed reload put on them:
 * after a restart, and in every process that serves a model when the checkpoint processor (maybe
 * another process) completes a reload. The staged folder must then be visible to them at the same
 * path. Every process with a fleet has one; the checkpoint processor, where it runs, tells it of
 * the reloads it made itself, so they are not made twice.
 */
export class ServedWeights {
  /** The staged checkpoint folder this process's built-in replicas serve, per model. */
  private readonly servedPaths = new Map<string, string>();

  constructor(
    private readonly deps: {
      queries: Pick<WeightsQueries, 'all'>;
      projector: Pick<Projector, 'onApplied'>;
      fleet: Fleet;
      log: Pick<Logger, 'error'>;
    },
  ) {}

  /**
   * Puts the last completed reload's weights on the built-in replicas now, and again whenever the
   * read models see another completed (here or in another process). Called once the read models
   * hold the whole log.
   */
  async follow(): Promise<void> {
    await this.restoreOrKeep();
    this.deps.projector.onApplied((events) => {
      if (events.some((event) => event.type === 'WeightsReloaded')) void this.restoreOrKeep();
    });
  }

  /** This process's built-in replicas of the model now serve the staged folder at `path`. */
  servedHere(model: string, path: string): void {
    this.servedPaths.set(model, path);
  }

  /** A reload that cannot be loaded here leaves the replicas serving what they served. */
  private async restoreOrKeep(): Promise<void> {
    try {
      await this.restore();
    } catch (error) {
      this.deps.log.error({ err: error }, 'could not load the last reloaded weights; serving the checkpoints as they were');
    }
  }

  private async restore(): Promise<void> {
    for (const row of this.deps.queries.all()) {
      if (!row.serving_path || this.servedPaths.get(row.model) === row.serving_path) continue;
      const pool = this.deps.fleet.engineFor(row.model);
      const inProcess = pool?.replicas.filter((replica) => replica.weightsInProcess) ?? [];
      if (inProcess.length === 0) continue;
      for (const replica of inProcess) await replica.reload({ path: row.serving_path, location: row.serving_location ?? row.serving_path, ...(row.serving_sync_id ? { syncId: row.serving_sync_id } : {}) });
      this.servedPaths.set(row.model, row.serving_path);
    }
  }
}
