import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import type { JobDefinition } from '../domain/job.js';
import { httpSchema } from '../http/http-schemas.js';

/** The job reserved on the embedded default, so the quick start has one to use. */
export const DEMO_JOB: JobDefinition = { job_id: 'job-demo', model: 'spool-tiny', use_case: 'quick start', sla: '24h', price_1m_tokens: 0.5 };

/** JOBS_FILE: a JSON array of job definitions, each checked like a POST /mgmt/v1/jobs body. */
export function readJobDefinitions(path: string): JobDefinition[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new Error(`JOBS_FILE ${path} cannot be read as JSON: ${(error as Error).message}`);
  }
  if (!Array.isArray(parsed)) throw new Error(`JOBS_FILE ${path} must hold a JSON array of job definitions`);
  const validate = new Ajv({ allErrors: true, strict: false }).compile<JobDefinition>(httpSchema('ReserveJobRequest'));
  return parsed.map((entry, index) => {
    if (!validate(entry)) {
      const problems = (validate.errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message}`).join('; ');
      throw new Error(`JOBS_FILE ${path}, entry ${index}: ${problems}`);
    }
    return entry;
  });
}
