import type OpenAI from 'openai';
import { TEST_API_KEY } from './service.js';

/** One chat request line of a batch input file. */
export const chatLine = (id: string, content: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body: { model: 'tiny-chat', messages: [{ role: 'user', content }] }, ...extra });

export async function reserveJob(url: string, job: Record<string, unknown>): Promise<Response> {
  return fetch(`${url}/mgmt/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(job),
  });
}

/**
 * What Spool's POST /v1/batches takes beyond the OpenAI client's types: the job the batch runs under
 * (required) and completion windows the client does not know (e.g. "unlimited").
 */
export interface CreateBatchRequest {
  readonly input_file_id: string;
  readonly endpoint: string;
  readonly completion_window: string;
  readonly job_id: string;
  readonly metadata?: Record<string, string>;
  readonly output_expires_after?: { readonly anchor: 'created_at'; readonly seconds: number };
}

/** Creates a batch through the real OpenAI client, with Spool's fields the client's types lack. */
export function createBatch(client: OpenAI, request: CreateBatchRequest): Promise<OpenAI.Batches.Batch> {
  return client.batches.create(request as unknown as Parameters<OpenAI['batches']['create']>[0]);
}

export async function waitForStatus(client: OpenAI, batchId: string, statuses: string[], timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const batch = await client.batches.retrieve(batchId);
    if (statuses.includes(batch.status)) return batch;
    if (Date.now() > deadline) throw new Error(`batch ${batchId} is ${batch.status}, not ${statuses.join('|')}, after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Polls until `condition` holds or `timeoutMs` is up, whichever comes first; what follows asserts. */
export async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !(await condition()) && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 20));
}

/** Polls until `condition` holds; throws, naming `what`, once `timeoutMs` is up. */
export async function waitFor(condition: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`not in time: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The share of a batch's lines that have ended (completed or failed); 0 before it is validated. */
export async function batchProgress(client: OpenAI, batchId: string): Promise<number> {
  const batch = await client.batches.retrieve(batchId);
  return (batch.request_counts!.completed + batch.request_counts!.failed) / Math.max(1, batch.request_counts!.total);
}

export async function fileLines(client: OpenAI, fileId: string | null | undefined): Promise<Array<Record<string, any>>> {
  if (!fileId) return [];
  const text = await (await client.files.content(fileId)).text();
  return text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, any>);
}

