// The whole batch flow with the official openai package: node examples/quickstart.mjs
// (SPOOL_URL defaults to http://127.0.0.1:8080, where `npm start` serves).
import OpenAI from 'openai';
import { createReadStream, writeFileSync } from 'node:fs';

const base = process.env.SPOOL_URL ?? 'http://127.0.0.1:8080';
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused' });

// The input: one request per line.
const questions = ['Hello', 'What is a batch?', 'Say something short'];
const lines = questions.map((content, index) =>
  JSON.stringify({ custom_id: `q${index + 1}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'spool-tiny', messages: [{ role: 'user', content }], max_tokens: 16 } }),
);
writeFileSync('requests.jsonl', lines.join('\n') + '\n');

const input = await client.files.create({ file: createReadStream('requests.jsonl'), purpose: 'batch' });
for await (const file of client.files.list({ limit: 100 })) console.log(file.id, file.filename);

let batch = await client.batches.create({
  input_file_id: input.id,
  endpoint: '/v1/chat/completions',
  completion_window: 'unlimited',
  job_id: 'job-demo', // an extra body field: the job reserved for your account
});
while (!['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) {
  await new Promise((resolve) => setTimeout(resolve, 500));
  batch = await client.batches.retrieve(batch.id);
}
console.log(batch.status, batch.request_counts);
if (batch.output_file_id) console.log(await (await client.files.content(batch.output_file_id)).text());
if (batch.error_file_id) console.log(await (await client.files.content(batch.error_file_id)).text());
await client.files.delete(input.id);
