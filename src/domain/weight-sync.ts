// Weight sync for one model serve name (stream weights-<model>): stage a checkpoint from object
// storage, then reload it onto the model's replicas. Pure decide/evolve.
import * as E from 'fp-ts/lib/Either.js';
import type { Decider } from './decider.js';
import type { CheckpointManifest } from './checkpoint-compatibility.js';
import { type Rejection, reject } from './rejection.js';

/** Spec §8: a failed step is tried at most this many times in all. */
export const MAX_SYNC_ATTEMPTS = 3;

export type SyncPhase = 'ready' | 'uploading' | 'reloading' | 'failed';
export type SyncStep = 'upload' | 'reload';

export interface StagedCheckpoint {
  readonly sync_id: string;
  readonly location: string;
  readonly path: string;
  readonly files: ReadonlyArray<{ readonly name: string; readonly bytes: number; readonly sha256: string }>;
  readonly staged_at: number;
}

export interface WeightSyncState {
  readonly model: string | null;
  readonly phase: SyncPhase;
  readonly syncId: string | null;
  readonly location: string | null;
  readonly attempt: number;
  readonly staged: StagedCheckpoint | null;
  /** What the current sync validated; it becomes `serving` when reloaded. */
  readonly validated: CheckpointManifest | null;
  /** The manifest of the checkpoint the model serves since the last reload; null before one. */
  readonly serving: CheckpointManifest | null;
  readonly stagedManifest: CheckpointManifest | null;
}

export const initialWeightSyncState: WeightSyncState = { model: null, phase: 'ready', syncId: null, location: null, attempt: 0, staged: null, validated: null, serving: null, stagedManifest: null };

export type WeightSyncCommand =
  | { readonly type: 'RequestUpload'; readonly model: string; readonly syncId: string; readonly location: string; readonly at: number }
  | {
      readonly type: 'RecordValidated';
      readonly syncId: string;
      readonly shards: ReadonlyArray<{ readonly name: string; readonly bytes: number; readonly etag: string }>;
      readonly manifest: CheckpointManifest;
      readonly at: number;
    }
  | { readonly type: 'RecordRejected'; readonly syncId: string; readonly differences: readonly string[]; readonly at: number }
  | { readonly type: 'RecordStaged'; readonly staged: StagedCheckpoint }
  | { readonly type: 'RecordAttemptFailed'; readonly syncId: string; readonly step: SyncStep; readonly error: string; readonly at: number }
  | { readonly type: 'RequestReload'; readonly model: string; readonly at: number }
  | { readonly type: 'RecordReplicaReloaded'; readonly syncId: string; readonly replica: string; readonly at: number }
  | { readonly type: 'RecordReloaded'; readonly syncId: string; readonly at: number };

type Model = { readonly model: string; readonly sync_id: string };
export type WeightSyncEvent =
  | { readonly type: 'WeightsUploadRequested'; readonly data: Model & { readonly location: string; readonly requested_at: number } }
  | {
      readonly type: 'CheckpointValidated';
      readonly data: Model & {
        readonly shards: ReadonlyArray<{ readonly name: string; readonly bytes: number; readonly etag: string }>;
        readonly manifest: CheckpointManifest;
        readonly validated_at: number;
      };
    }
  | { readonly type: 'CheckpointRejected'; readonly data: Model & { readonly differences: readonly string[]; readonly rejected_at: number } }
  | { readonly type: 'WeightsStaged'; readonly data: Model & Omit<StagedCheckpoint, 'sync_id'> }
  | { readonly type: 'WeightSyncAttemptFailed'; readonly data: Model & { readonly step: SyncStep; readonly attempt: number; readonly error: string; readonly failed_at: number } }
  | { readonly type: 'WeightSyncFailed'; readonly data: Model & { readonly step: SyncStep; readonly attempts: number; readonly error: string; readonly failed_at: number } }
  | { readonly type: 'WeightsReloadRequested'; readonly data: Model & { readonly location: string; readonly requested_at: number } }
  | { readonly type: 'ReplicaReloaded'; readonly data: Model & { readonly replica: string; readonly location: string; readonly reloaded_at: number } }
  | { readonly type: 'WeightsReloaded'; readonly data: Model & { readonly location: string; readonly path: string; readonly reloaded_at: number } };

/** `s3://bucket/prefix/`: a bucket and a folder-like prefix, with the trailing slash. */
export function parseCheckpointLocation(location: string): { bucket: string; prefix: string } | undefined {
  const match = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\/((?:[^/\s]+\/)+)$/.exec(location);
  return match ? { bucket: match[1]!, prefix: match[2]! } : undefined;
}

export function decideWeightSync(command: WeightSyncCommand, state: WeightSyncState): E.Either<Rejection, WeightSyncEvent[]> {
  const current = (syncId: string) => state.syncId === syncId;
  switch (command.type) {
    case 'RequestUpload':
      if (!parseCheckpointLocation(command.location)) {
        return reject('invalid', `Invalid checkpoint location ${JSON.stringify(command.location)}: expected s3://<bucket>/<prefix>/`, `weights.${command.model}`);
      }
      if (state.phase === 'uploading' || state.phase === 'reloading') {
        return reject('conflict', `A weight sync for ${command.model} is ${state.phase} already; wait until it is ready or failed`, `weights.${command.model}`);
      }
      return E.right([{ type: 'WeightsUploadRequested', data: { model: command.model, sync_id: command.syncId, location: command.location, requested_at: command.at } }]);
    case 'RecordValidated':
      if (!current(command.syncId) || state.phase !== 'uploading') return E.right([]);
      return E.right([{ type: 'CheckpointValidated', data: { model: state.model ?? '', sync_id: command.syncId, shards: command.shards, manifest: command.manifest, validated_at: command.at } }]);
    case 'RecordRejected':
      if (!current(command.syncId) || state.phase !== 'uploading') return E.right([]);
      return E.right([{ type: 'CheckpointRejected', data: { model: state.model ?? '', sync_id: command.syncId, differences: command.differences, rejected_at: command.at } }]);
    case 'RecordStaged':
      if (!current(command.staged.sync_id) || state.phase !== 'uploading') return E.right([]);
      return E.right([{ type: 'WeightsStaged', data: { model: state.model ?? '', ...command.staged } }]);
    case 'RecordAttemptFailed': {
      if (!current(command.syncId) || (state.phase !== 'uploading' && state.phase !== 'reloading')) return E.right([]);
      const attempt = state.attempt + 1;
      const failed: WeightSyncEvent = { type: 'WeightSyncAttemptFailed', data: { model: state.model ?? '', sync_id: command.syncId, step: command.step, attempt, error: command.error, failed_at: command.at } };
      if (attempt < MAX_SYNC_ATTEMPTS) return E.right([failed]);
      return E.right([
        failed,
        { type: 'WeightSyncFailed', data: { model: state.model ?? '', sync_id: command.syncId, step: command.step, attempts: attempt, error: command.error, failed_at: command.at } },
      ]);
    }
    case 'RequestReload':
      if (state.phase === 'uploading' || state.phase === 'reloading') {
        return reject('conflict', `A weight sync for ${command.model} is ${state.phase} already; wait until it is ready`, `weights.${command.model}`);
      }
      if (!state.staged) return reject('precondition_failed', `Nothing is staged for ${command.model}: upload a checkpoint first`, `weights.${command.model}`);
      return E.right([{ type: 'WeightsReloadRequested', data: { model: command.model, sync_id: state.staged.sync_id, location: state.staged.location, requested_at: command.at } }]);
    case 'RecordReplicaReloaded':
      if (!current(command.syncId) || state.phase !== 'reloading' || !state.staged) return E.right([]);
      return E.right([{ type: 'ReplicaReloaded', data: { model: state.model ?? '', sync_id: command.syncId, replica: command.replica, location: state.staged.location, reloaded_at: command.at } }]);
    case 'RecordReloaded':
      if (!current(command.syncId) || state.phase !== 'reloading' || !state.staged) return E.right([]);
      return E.right([{ type: 'WeightsReloaded', data: { model: state.model ?? '', sync_id: command.syncId, location: state.staged.location, path: state.staged.path, reloaded_at: command.at } }]);
  }
}

export function evolveWeightSync(state: WeightSyncState, event: WeightSyncEvent): WeightSyncState {
  switch (event.type) {
    case 'WeightsUploadRequested':
      return { ...state, model: event.data.model, phase: 'uploading', syncId: event.data.sync_id, location: event.data.location, attempt: 0 };
    case 'CheckpointValidated':
      return { ...state, validated: event.data.manifest };
    case 'CheckpointRejected':
      return { ...state, phase: 'failed' };
    case 'WeightsStaged': {
      const { model: _model, ...staged } = event.data;
      return { ...state, phase: 'ready', attempt: 0, staged, stagedManifest: state.validated };
    }
    case 'WeightSyncAttemptFailed':
      return { ...state, attempt: event.data.attempt };
    case 'WeightSyncFailed':
      return { ...state, phase: 'failed' };
    case 'WeightsReloadRequested':
      return { ...state, model: event.data.model, phase: 'reloading', syncId: event.data.sync_id, attempt: 0 };
    case 'ReplicaReloaded':
      return state;
    case 'WeightsReloaded':
      return { ...state, phase: 'ready', attempt: 0, staged: null, serving: state.stagedManifest ?? state.serving, stagedManifest: null };
  }
}

export const weightSyncDecider: Decider<WeightSyncCommand, WeightSyncState, WeightSyncEvent> = { decide: decideWeightSync, evolve: evolveWeightSync, initialState: initialWeightSyncState };
