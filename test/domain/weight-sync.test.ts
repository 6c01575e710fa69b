import { describe, expect, it } from 'vitest';
import { type WeightSyncEvent, decideWeightSync, evolveWeightSync, initialWeightSyncState, weightSyncDecider } from '../../src/domain/weight-sync.js';
import { deciderSpec } from '../support/decider-spec.js';

const spec = deciderSpec(weightSyncDecider);
const location = 's3://bucket/ckpt/v2/';
const requested: WeightSyncEvent = { type: 'WeightsUploadRequested', data: { model: 'm', sync_id: 's1', location, requested_at: 1 } };
const failedAttempt = (attempt: number): WeightSyncEvent => ({ type: 'WeightSyncAttemptFailed', data: { model: 'm', sync_id: 's1', step: 'upload', attempt, error: 'boom', failed_at: 2 } });

describe('weight sync aggregate', () => {
  it('accepts an upload to s3://bucket/prefix/ only', () => {
    spec.given([]).when({ type: 'RequestUpload', model: 'm', syncId: 's1', location, at: 1 }).then([requested]);
    spec.given([]).when({ type: 'RequestUpload', model: 'm', syncId: 's1', location: 's3://bucket/ckpt', at: 1 }).thenRejects({ kind: 'invalid', param: 'weights.m' });
    spec.given([]).when({ type: 'RequestUpload', model: 'm', syncId: 's1', location: 'https://x/y/', at: 1 }).thenRejects({ kind: 'invalid' });
  });

  it('refuses a second upload while one runs, and a reload with nothing staged', () => {
    spec.given([requested]).when({ type: 'RequestUpload', model: 'm', syncId: 's2', location, at: 3 }).thenRejects({ kind: 'conflict' });
    spec.given([]).when({ type: 'RequestReload', model: 'm', at: 3 }).thenRejects({ kind: 'precondition_failed' });
  });

  it('fails the sync on the third failed attempt of a step', () => {
    spec.given([requested]).when({ type: 'RecordAttemptFailed', syncId: 's1', step: 'upload', error: 'boom', at: 2 }).then([failedAttempt(1)]);
    spec.given([requested, failedAttempt(1)]).when({ type: 'RecordAttemptFailed', syncId: 's1', step: 'upload', error: 'boom', at: 2 }).then([failedAttempt(2)]);
    spec
      .given([requested, failedAttempt(1), failedAttempt(2)])
      .when({ type: 'RecordAttemptFailed', syncId: 's1', step: 'upload', error: 'boom', at: 2 })
      .then([failedAttempt(3), { type: 'WeightSyncFailed', data: { model: 'm', sync_id: 's1', step: 'upload', attempts: 3, error: 'boom', failed_at: 2 } }]);
  });

  it('ignores results of a sync that is no longer the current one', () => {
    spec.given([requested]).when({ type: 'RecordAttemptFailed', syncId: 'old', step: 'upload', error: 'late', at: 2 }).then([]);
  });
});

describe('weight sync state', () => {
  const manifest = { architectures: ['SpoolForCausalLM'], model_type: 'spool', quantization_config: null, tensors: { w: { dtype: 'F32', shape: [2, 2] } } };
  it('serves the manifest of the checkpoint it reloaded, and forgets what was staged', () => {
    const events: WeightSyncEvent[] = [
      requested,
      { type: 'CheckpointValidated', data: { model: 'm', sync_id: 's1', shards: [], manifest, validated_at: 2 } },
      { type: 'WeightsStaged', data: { model: 'm', sync_id: 's1', location, path: '/staging/s1', files: [], staged_at: 3 } },
      { type: 'WeightsReloadRequested', data: { model: 'm', sync_id: 's1', location, requested_at: 4 } },
      { type: 'WeightsReloaded', data: { model: 'm', sync_id: 's1', location, path: '/staging/s1', reloaded_at: 5 } },
    ];
    const state = events.reduce(evolveWeightSync, initialWeightSyncState);
    expect(state.phase).toBe('ready');
    expect(state.serving).toEqual(manifest);
    expect(state.staged).toBeNull();
    expect(decideWeightSync({ type: 'RequestReload', model: 'm', at: 6 }, state)).toMatchObject({ _tag: 'Left', left: { kind: 'precondition_failed' } });
  });
});
