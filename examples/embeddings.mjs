// A batch of embeddings on the built-in model all-MiniLM-L6-v2: node examples/embeddings.mjs
// (SPOOL_URL defaults to http://127.0.0.1:8080, where `npm start` serves).
import OpenAI, { toFile } from 'openai';

const base = process.env.SPOOL_URL ?? 'http://127.0.0.1:8080';
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused' });

const sentences = ['A man is eating food.', 'A man is eating a piece of bread.', 'The stock market fell sharply today.'];
const lines = sentences.map((input, index) =>
  JSON.stringify({ custom_id: `s${index}`, method: 'POST', url: '/v1/embeddings', body: { model: 'all-minilm-l6-v2', input } }),
);
const input = await client.files.create({ file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'sentences.jsonl'), purpose: 'batch' });
let batch = await client.batches.create({ input_file_id: input.id, endpoint: '/v1/embeddings', completion_window: 'unlimited', job_id: 'job-embeddings' });
while (!['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) {
  await new Promise((resolve) => setTimeout(resolve, 250));
  batch = await client.batches.retrieve(batch.id);
}
console.log(batch.status, batch.request_counts);

const vectors = new Map();
for (const line of (await (await client.files.content(batch.output_file_id)).text()).split('\n').filter(Boolean)) {
  const { custom_id, response } = JSON.parse(line);
  vectors.set(custom_id, response.body.data[0].embedding);
}
// The vectors are unit length: their dot product is their cosine similarity.
const cosine = (a, b) => a.reduce((sum, value, index) => sum + value * b[index], 0);
console.log('food ~ bread ', cosine(vectors.get('s0'), vectors.get('s1')).toFixed(3));
console.log('food ~ market', cosine(vectors.get('s0'), vectors.get('s2')).toFixed(3));
