import { describe, expect, it } from 'vitest';
import { type JobDefinition, type JobEvent, jobDecider, slaSeconds } from '../../src/domain/job.js';
import { deciderSpec } from '../support/decider-spec.js';

const spec = deciderSpec(jobDecider);
const job: JobDefinition = { job_id: 'job-demo', model: 'spool-tiny', use_case: 'demo', sla: '24h', price_1m_tokens: 0.5 };
const reserved: JobEvent = { type: 'JobReserved', data: { ...job, reserved_at: 100 } };

describe('Job aggregate', () => {
  it('reserves a job id', () => {
    spec.given([]).when({ type: 'ReserveJob', job, at: 100 }).then([reserved]);
    spec.given([reserved]).thenState({ status: 'reserved', job, reservedAt: 100 });
  });

  it('accepts the same definition again and records nothing', () => {
    spec.given([reserved]).when({ type: 'ReserveJob', job, at: 200 }).then([]);
  });

  it('refuses another definition for a reserved id', () => {
    for (const change of [{ model: 'other' }, { use_case: 'other' }, { sla: '7d' }, { price_1m_tokens: 0.6 }]) {
      spec.given([reserved]).when({ type: 'ReserveJob', job: { ...job, ...change }, at: 200 }).thenRejects({ kind: 'conflict', param: 'job_id' });
    }
  });

  it('refuses a malformed sla, naming the forms it takes, before looking at the state', () => {
    for (const sla of ['24', 'h', '0s', '1w', '24 h', '']) {
      spec.given([]).when({ type: 'ReserveJob', job: { ...job, sla }, at: 100 }).thenRejects({ kind: 'invalid', param: 'sla', message: expect.stringContaining('24h, 7d, 90m or 3600s, or none') });
      spec.given([reserved]).when({ type: 'ReserveJob', job: { ...job, sla }, at: 100 }).thenRejects({ kind: 'invalid', param: 'sla' });
    }
  });

  it('takes none for a job whose batches never expire', () => {
    spec.given([]).when({ type: 'ReserveJob', job: { ...job, sla: 'none' }, at: 100 }).then([{ type: 'JobReserved', data: { ...job, sla: 'none', reserved_at: 100 } }]);
    expect(slaSeconds('none')).toBeNull();
    expect([slaSeconds('90s'), slaSeconds('90m'), slaSeconds('2h'), slaSeconds('7d')]).toEqual([90, 5400, 7200, 604800]);
  });
});
