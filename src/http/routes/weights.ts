import type { FastifyInstance, FastifyRequest } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import type { WeightSync } from '../../application/weight-sync.js';
import type { Rejection } from '../../domain/rejection.js';
import { MAX_SYNC_ATTEMPTS } from '../../domain/weight-sync.js';
import type { Fleet } from '../../engine/fleet.js';
import type { WeightsQueries } from '../../../projections/weights-projection.js';
import { ApiError, fromRejection } from '../api-error.js';
import { httpSchema } from '../../platform/schemas.js';
import { requestMetadata } from '../request-metadata.js';

export interface WeightRouteDeps {
  readonly fleet: Fleet;
  readonly weightSync: WeightSync;
  readonly weightsQueries: WeightsQueries;
}

// Documentation only: the status of a model grows fields as weight sync does, and a response
// schema would make fastify drop any it does not list.
const MODEL_STATUS_DOC = {
  type: 'object',
  required: ['state', 'serving', 'staged', 'sync', 'replicas'],
  properties: {
    state: { type: 'string', description: 'ready, or the step weight sync is at' },
    serving: { type: 'object', required: ['checkpoint', 'since'], properties: { checkpoint: { type: 'string' }, since: { type: ['integer', 'null'] } } },
    staged: { type: ['object', 'null'], description: 'The checkpoint staged for the next reload' },
    sync: { type: ['object', 'null'], description: 'The latest sync: step, attempts, last error, timestamps' },
    replicas: { type: 'array', items: { type: 'object' } },
  },
};

const SYNC_DOC = {
  description: 'Accepted: the outcome per model (accepted, with its status, or the error)',
  content: {
    'application/json': {
      schema: {
        type: 'object',
        required: ['object', 'results'],
        properties: {
          object: { type: 'string', enum: ['weights.sync'] },
          results: { type: 'object', additionalProperties: { type: 'object', required: ['accepted'], properties: { accepted: { type: 'boolean' } } } },
        },
      },
    },
  },
};

const STATUS_DOC = {
  description: 'Weight sync state of every model the fleet serves',
  content: {
    'application/json': {
      schema: {
        type: 'object',
        required: ['object', 'models'],
        properties: { object: { type: 'string', enum: ['weights.status'] }, models: { type: 'object', additionalProperties: MODEL_STATUS_DOC } },
      },
    },
  },
};

/** Weight sync under /mgmt/v1 (bearer API_KEY): stage, reload, status. */
export function registerWeightRoutes(app: FastifyInstance, deps: WeightRouteDeps): void {
  const security = [{ bearer: [] }];

  const status = (model: string) => {
    const row = deps.weightsQueries.get(model);
    const reloaded = new Map(deps.weightsQueries.replicas(model).map((replica) => [replica.replica, replica]));
    const pool = deps.fleet.engineFor(model);
    return {
      state: row?.state ?? 'ready',
      serving: row?.serving_location ? { checkpoint: row.serving_location, since: row.serving_since } : { checkpoint: 'initial', since: null },
      staged: row?.staged_location ? { checkpoint: row.staged_location, path: row.staged_path, files: JSON.parse(row.staged_files ?? '[]'), staged_at: row.staged_at } : null,
      sync: row
        ? {
            id: row.sync_id,
            step: row.step,
            location: row.location,
            attempt: row.attempt,
            max_attempts: MAX_SYNC_ATTEMPTS,
            last_error: row.last_error,
            requested_at: row.requested_at,
            validated_at: row.validated_at,
            reload_requested_at: row.reload_requested_at,
            failed_at: row.failed_at,
            updated_at: row.updated_at,
          }
        : null,
      replicas: (pool?.replicas ?? []).map((replica) => ({
        id: replica.id,
        kind: replica.kind,
        checkpoint: replica.servedCheckpoint,
        reloaded_at: reloaded.get(replica.id)?.reloaded_at ?? null,
      })),
    };
  };

  const each = async (request: FastifyRequest, act: (model: string, location: string) => Promise<E.Either<Rejection, unknown>>) => {
    const weights = (request.body as { weights: Record<string, string> }).weights;
    const results: Record<string, unknown> = {};
    const errors: ApiError[] = [];
    for (const [model, location] of Object.entries(weights)) {
      if (!deps.fleet.models().includes(model)) {
        const error = new ApiError(404, `Unknown model serve name ${JSON.stringify(model)}: the fleet serves ${deps.fleet.models().join(', ')}`, 'invalid_request_error', 'model_not_found', `weights.${model}`);
        errors.push(error);
        results[model] = { accepted: false, ...error.toBody() };
        continue;
      }
      const outcome = await act(model, location);
      if (E.isLeft(outcome)) {
        const error = fromRejection(outcome.left);
        errors.push(error);
        results[model] = { accepted: false, ...error.toBody() };
      } else results[model] = { accepted: true, ...status(model) };
    }
    // One model, or none accepted: the first error answers, in the envelope.
    if (errors.length === Object.keys(weights).length) throw errors[0]!;
    return { object: 'weights.sync', results };
  };

  const body = httpSchema('WeightsRequest');
  app.post(
    '/mgmt/v1/weights/upload',
    { schema: { summary: 'Stage checkpoints from object storage (validated from their headers first)', tags: ['weights'], security, body }, config: { openapi: { responses: { 202: SYNC_DOC } } } },
    async (request, reply) => reply.status(202).send(await each(request, (model, location) => deps.weightSync.requestUpload(model, location, requestMetadata(request)))),
  );
  app.post(
    '/mgmt/v1/weights/reload',
    { schema: { summary: 'Swap the staged checkpoints onto the fleet, replica by replica', tags: ['weights'], security, body }, config: { openapi: { responses: { 202: SYNC_DOC } } } },
    async (request, reply) => reply.status(202).send(await each(request, (model) => deps.weightSync.requestReload(model, requestMetadata(request)))),
  );
  app.get('/mgmt/v1/weights/status', { schema: { summary: 'Weight sync state of every model', tags: ['weights'], security }, config: { openapi: { responses: { 200: STATUS_DOC } } } }, async () => ({
    object: 'weights.status',
    models: Object.fromEntries(deps.fleet.models().map((model) => [model, status(model)])),
  }));
}
