import type { FastifyRequest } from 'fastify';

/**
 * The batch a request created, if any: that request's span is the batch's root span, so the
 * batch's whole trace starts with the call that made it.
 */
const createdBatch = new WeakMap<FastifyRequest, string>();

export function markBatchCreated(request: FastifyRequest, batchId: string): void {
  createdBatch.set(request, batchId);
}

export function batchCreatedBy(request: FastifyRequest): string | undefined {
  return createdBatch.get(request);
}
