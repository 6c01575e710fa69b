import type { FastifyInstance } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import type { JobRegistry } from '../../application/job-registry.js';
import type { JobDefinition } from '../../domain/job.js';
import type { JobsQueries } from '../../../projections/jobs-projection.js';
import { fromRejection } from '../api-error.js';
import { httpSchema } from '../../platform/schemas.js';
import { requestMetadata } from '../request-metadata.js';

export interface JobRouteDeps {
  readonly jobs: JobRegistry;
  readonly jobsQueries: JobsQueries;
}

const jobObject = (job: Omit<JobDefinition, 'account_id'> & { readonly account_id?: string | null }, createdAt: number) => ({
  object: 'job' as const,
  job_id: job.job_id,
  model: job.model,
  use_case: job.use_case,
  sla: job.sla,
  price_1m_tokens: job.price_1m_tokens,
  created_at: createdAt,
  ...(job.account_id !== undefined && job.account_id !== null ? { account_id: job.account_id } : {}),
});

/** Operators reserve job ids for accounts ahead of time (bearer API_KEY, under /mgmt/v1). */
export function registerJobRoutes(app: FastifyInstance, deps: JobRouteDeps): void {
  const security = [{ bearer: [] }];
  app.post(
    '/mgmt/v1/jobs',
    {
      schema: {
        summary: 'Reserve a job definition (201; the same definition again: 200; a different one for the id: 409)',
        tags: ['jobs'],
        security,
        body: httpSchema('ReserveJobRequest'),
        response: { 200: httpSchema('Job'), 201: httpSchema('Job') },
      },
    },
    async (request, reply) => {
      const job = request.body as JobDefinition;
      const reserved = await deps.jobs.reserve(job, requestMetadata(request));
      if (E.isLeft(reserved)) throw fromRejection(reserved.left);
      return reply.status(reserved.right.created ? 201 : 200).send(jobObject(reserved.right.job, reserved.right.reservedAt));
    },
  );

  app.get(
    '/mgmt/v1/jobs',
    { schema: { summary: 'List reserved job definitions', tags: ['jobs'], security, response: { 200: httpSchema('JobList') } } },
    async () => ({ object: 'list' as const, data: deps.jobsQueries.list().map((row) => jobObject(row, row.reserved_at)) }),
  );
}
