// Section 15 of bench/RESULTS.md: real models (bench/real-models.ts).
import type { Results, ResultsFormat } from './results-store.js';

export function realModelsSections(results: Results, format: ResultsFormat): { summary: string[]; sections: string[] } {
  const stored = results.realModels;
  if (!stored) return { summary: [], sections: [] };
  const { fixed, percent, met, when, data } = format;
  const { embeddings: e, firstToken: t, rounds } = stored.data;
  const addedP50 = t.spool.p50Ms - t.direct.p50Ms;
  const addedP99 = t.spool.p99Ms - t.direct.p99Ms;
  const summary = [
    `| 15. Embeddings batch (all-minilm-l6-v2, ${e.lines.toLocaleString('en')} lines) | onnxruntime directly ${fixed(e.directSentencesPerSecond, 0)} sentences/s | ${fixed(e.spoolSentencesPerSecond, 0)} sentences/s, peak RSS ${fixed(e.spoolPeakRssMiB, 0)} MiB | ${percent(e.ratio)} | ≥ 85% | ${met(e.ratio >= 0.85)} |`,
    `| 15. Time to first token through /compat/v1 (stream) | engine directly p50 ${fixed(t.direct.p50Ms)} ms, p99 ${fixed(t.direct.p99Ms)} ms | p50 ${fixed(t.spool.p50Ms)} ms, p99 ${fixed(t.spool.p99Ms)} ms | +${fixed(addedP50)} / +${fixed(addedP99)} ms | ≤ +5 ms p50, ≤ +15 ms p99 | ${met(addedP50 <= 5 && addedP99 <= 15)} |`,
  ];
  const section = [
    '## 15. Real models: the built-in embedding model, and the first token of a relayed stream',
    '',
    when(stored) + ` Median of ${rounds} round${rounds === 1 ? '' : 's'}.`,
    '',
    `**Embeddings.** ${e.lines.toLocaleString('en')} sentences of 8 to 30 words. Baseline: onnxruntime (onnxruntime-node, CPU) and the model's tokenizer called directly in the benchmark process, ` +
      `batches of ${e.batchSize}, mean pooling and normalisation, after one warm-up batch. Spool: a fresh \`spool serve\` on the embedded default, one warm-up request, then the whole batch on \`job-embeddings\` ` +
      'with the official `openai` client: upload, create, poll every 50 ms, download the output (every custom_id checked once); the clock runs from the upload to the output\'s last byte. Both sides on the same 2 cores.',
    '',
    '| onnxruntime directly | spool, end to end | spool / direct | target | CPU per sentence (direct / spool, every thread) | spool peak RSS |',
    '|---|---|---|---|---|---|',
    `| ${fixed(e.directSentencesPerSecond, 0)} sentences/s | ${fixed(e.spoolSentencesPerSecond, 0)} sentences/s | ${percent(e.ratio)} | ≥ 85% | ${fixed(e.directCpuMsPerSentence, 2)} / ${fixed(e.spoolCpuMsPerSentence, 2)} ms | ${fixed(e.spoolPeakRssMiB, 0)} MiB |`,
    ...(e.previous
      ? [
          `| previous build (${e.previous.build}), same rounds | ${fixed(e.previous.spoolSentencesPerSecond, 0)} sentences/s | ${percent(e.previous.ratio)} | ≥ 85% | ${fixed(e.directCpuMsPerSentence, 2)} / ${fixed(e.previous.spoolCpuMsPerSentence, 2)} ms | ${fixed(e.previous.spoolPeakRssMiB, 0)} MiB |`,
        ]
      : []),
    '',
    `**Time to first token.** The upstream simulator\'s continuous-batching engine (bench/upstream.ts --engine continuous, its default calibration), standing in for a vLLM server. ${t.requests} streamed chat requests (8 tokens) one at a time, ` +
      'alternately to the engine directly and through `/compat/v1` of a service whose FLEET_FILE names it as a `vllm` replica, after 10 of each to warm up; the time from sending to the first piece of text.',
    '',
    '| | p50 | p99 |',
    '|---|---|---|',
    `| engine directly | ${fixed(t.direct.p50Ms)} ms | ${fixed(t.direct.p99Ms)} ms |`,
    `| through /compat/v1 | ${fixed(t.spool.p50Ms)} ms | ${fixed(t.spool.p99Ms)} ms |`,
    `| added (target ≤ 5 ms / ≤ 15 ms) | ${fixed(addedP50)} ms | ${fixed(addedP99)} ms |`,
    '',
    data('realModels', stored),
  ].join('\n');
  return { summary, sections: [section] };
}
