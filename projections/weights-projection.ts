import type Database from 'better-sqlite3';
import type { WeightSyncEvent } from '../src/domain/weight-sync.js';
import { streamKind } from '../src/domain/stream-names.js';
import type { Projection } from './projection.js';
import { statement } from './read-model-store.js';

export const weightsProjection: Projection = {
  name: 'weights',
  version: 2,
  create(db) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS weight_syncs (
        model               TEXT PRIMARY KEY,
        state               TEXT    NOT NULL,
        sync_id             TEXT,
        step                TEXT,
        location            TEXT,
        attempt             INTEGER NOT NULL DEFAULT 0,
        last_error          TEXT,
        requested_at        INTEGER,
        validated_at        INTEGER,
        staged_location     TEXT,
        staged_path         TEXT,
        staged_files        TEXT,
        staged_at           INTEGER,
        reload_requested_at INTEGER,
        serving_location    TEXT,
        serving_path        TEXT,
        serving_sync_id     TEXT,
        serving_since       INTEGER,
        failed_at           INTEGER,
        updated_at          INTEGER
      );
      CREATE TABLE IF NOT EXISTS weight_replicas (
        model       TEXT NOT NULL,
        replica     TEXT NOT NULL,
        location    TEXT NOT NULL,
        reloaded_at INTEGER NOT NULL,
        PRIMARY KEY (model, replica)
      );
    `);
  },
  drop(db) {
    db.exec('DROP TABLE IF EXISTS weight_syncs; DROP TABLE IF EXISTS weight_replicas;');
  },
  apply(db, recorded) {
    if (streamKind(recorded.streamName) !== 'weights') return;
    const event = recorded as unknown as WeightSyncEvent;
    const data = event.data as Record<string, unknown> & { model: string };
    const set = (assignments: string, params: Record<string, unknown> = {}) =>
      statement(db, `UPDATE weight_syncs SET ${assignments} WHERE model = @model`).run({ ...params, model: data.model });
    switch (event.type) {
      case 'WeightsUploadRequested':
        statement(db, "INSERT INTO weight_syncs (model, state) VALUES (?, 'ready') ON CONFLICT (model) DO NOTHING").run(data.model);
        set("state = 'uploading', step = 'upload', sync_id = @sync_id, location = @location, attempt = 0, last_error = NULL, requested_at = @at, validated_at = NULL, failed_at = NULL, updated_at = @at", {
          sync_id: event.data.sync_id,
          location: event.data.location,
          at: event.data.requested_at,
        });
        return;
      case 'CheckpointValidated':
        set('validated_at = @at, updated_at = @at', { at: event.data.validated_at });
        return;
      case 'CheckpointRejected':
        set("state = 'failed', last_error = @error, failed_at = @at, updated_at = @at", { error: event.data.differences.join('\n'), at: event.data.rejected_at });
        return;
      case 'WeightsStaged':
        set("state = 'ready', attempt = 0, staged_location = @location, staged_path = @path, staged_files = @files, staged_at = @at, updated_at = @at", {
          location: event.data.location,
          path: event.data.path,
          files: JSON.stringify(event.data.files),
          at: event.data.staged_at,
        });
        return;
      case 'WeightSyncAttemptFailed':
        set('attempt = @attempt, last_error = @error, updated_at = @at', { attempt: event.data.attempt, error: event.data.error, at: event.data.failed_at });
        return;
      case 'WeightSyncFailed':
        set("state = 'failed', last_error = @error, failed_at = @at, updated_at = @at", { error: event.data.error, at: event.data.failed_at });
        return;
      case 'WeightsReloadRequested':
        set("state = 'reloading', step = 'reload', sync_id = @sync_id, attempt = 0, last_error = NULL, reload_requested_at = @at, failed_at = NULL, updated_at = @at", {
          sync_id: event.data.sync_id,
          at: event.data.requested_at,
        });
        return;
      case 'ReplicaReloaded':
        statement(db, 'INSERT INTO weight_replicas (model, replica, location, reloaded_at) VALUES (?, ?, ?, ?) ON CONFLICT (model, replica) DO UPDATE SET location = excluded.location, reloaded_at = excluded.reloaded_at').run(
          data.model,
          event.data.replica,
          event.data.location,
          event.data.reloaded_at,
        );
        set('updated_at = @at', { at: event.data.reloaded_at });
        return;
      case 'WeightsReloaded':
        set("state = 'ready', attempt = 0, serving_location = @location, serving_path = @path, serving_sync_id = @sync_id, serving_since = @at, staged_location = NULL, staged_path = NULL, staged_files = NULL, staged_at = NULL, updated_at = @at", {
          location: event.data.location,
          path: event.data.path,
          sync_id: event.data.sync_id,
          at: event.data.reloaded_at,
        });
        return;
    }
  },
};

export interface WeightSyncRow {
  readonly model: string;
  readonly state: 'ready' | 'uploading' | 'reloading' | 'failed';
  readonly sync_id: string | null;
  readonly step: 'upload' | 'reload' | null;
  readonly location: string | null;
  readonly attempt: number;
  readonly last_error: string | null;
  readonly requested_at: number | null;
  readonly validated_at: number | null;
  readonly staged_location: string | null;
  readonly staged_path: string | null;
  readonly staged_files: string | null;
  readonly staged_at: number | null;
  readonly reload_requested_at: number | null;
  readonly serving_location: string | null;
  readonly serving_path: string | null;
  /** The sync whose reload put the serving weights there. */
  readonly serving_sync_id: string | null;
  readonly serving_since: number | null;
  readonly failed_at: number | null;
  readonly updated_at: number | null;
}

export class WeightsQueries {
  constructor(private readonly db: Database.Database) {}

  all(): WeightSyncRow[] {
    return statement(this.db, 'SELECT * FROM weight_syncs ORDER BY model').all() as WeightSyncRow[];
  }

  get(model: string): WeightSyncRow | undefined {
    return statement(this.db, 'SELECT * FROM weight_syncs WHERE model = ?').get(model) as WeightSyncRow | undefined;
  }

  replicas(model: string): Array<{ replica: string; location: string; reloaded_at: number }> {
    return statement(this.db, 'SELECT replica, location, reloaded_at FROM weight_replicas WHERE model = ? ORDER BY replica').all(model) as Array<{ replica: string; location: string; reloaded_at: number }>;
  }
}
