import type { JobDefinition } from '../domain/job.js';
import { readJsonFile } from '../platform/schemas.js';

/** The job reserved on the embedded default, so the quick start has one to use. */
export const DEMO_JOB: JobDefinition = { job_id: 'job-demo', model: 'spool-tiny', use_case: 'quick start', sla: '24h', price_1m_tokens: 0.5 };

/** The job reserved on the embedded default for the built-in embedding model, where the fleet serves it. */
export const EMBEDDINGS_JOB: JobDefinition = { job_id: 'job-embeddings', model: 'all-minilm-l6-v2', use_case: 'embeddings', sla: '24h', price_1m_tokens: 0.02 };

/** JOBS_FILE: a JSON array of job definitions, each checked like a POST /mgmt/v1/jobs body (schemas/config/jobs.json). */
export function readJobDefinitions(path: string): JobDefinition[] {
  return readJsonFile<JobDefinition[]>(path, 'jobs', 'JOBS_FILE');
}
