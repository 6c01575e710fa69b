import type * as E from 'fp-ts/lib/Either.js';
import type { Clock } from '../platform/clock.js';
import { newWeightSyncId } from '../platform/ids.js';
import type { Rejection } from '../domain/rejection.js';
import { type WeightSyncCommand, type WeightSyncEvent, type WeightSyncState, weightSyncDecider } from '../domain/weight-sync.js';
import { weightsStreamName } from '../domain/stream-names.js';
import { type CommandContext, type CommandMetadata, type Handled, execute, loadState } from './command-handler.js';

export type WeightSyncOutcome = E.Either<Rejection, Handled<WeightSyncState, WeightSyncEvent>>;

/**
 * Commands on a model's weight sync (stream weights-<model>): the operator's requests, and the
 * results the checkpoint processor records as it stages and reloads.
 */
export class WeightSync {
  constructor(private readonly deps: CommandContext & { clock: Clock }) {}

  requestUpload(model: string, location: string, metadata: CommandMetadata): Promise<WeightSyncOutcome> {
    const syncId = newWeightSyncId();
    return this.record(model, { type: 'RequestUpload', model, syncId, location, at: this.deps.clock.nowSeconds() }, metadata);
  }

  requestReload(model: string, metadata: CommandMetadata): Promise<WeightSyncOutcome> {
    return this.record(model, { type: 'RequestReload', model, at: this.deps.clock.nowSeconds() }, metadata);
  }

  /** Runs a command on the model's sync; the read models hold its events when this returns. */
  record(model: string, command: WeightSyncCommand, metadata: CommandMetadata, eventIds?: (event: WeightSyncEvent, index: number) => string): Promise<WeightSyncOutcome> {
    return execute(this.deps, weightsStreamName(model), weightSyncDecider, command, { metadata, ...(eventIds ? { eventIds } : {}) });
  }

  /** The sync as the log has it (the read model lacks the staged files and the manifests). */
  async state(model: string): Promise<WeightSyncState> {
    return (await loadState(this.deps.eventStore, weightsStreamName(model), weightSyncDecider)).state;
  }
}
