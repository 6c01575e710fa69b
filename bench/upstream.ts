// The benchmarks' local OpenAI-compatible upstream, run as its own process. Two models of an
// inference server:
//   node dist/bench/upstream.js LATENCY_MS CONCURRENCY [...]   every answer after a fixed latency,
//     at most CONCURRENCY at once (bench/fixed-latency-upstream.ts);
//   node dist/bench/upstream.js --engine continuous|embeddings [...]   a continuous-batching engine
//     stepping its running sequences together, as vLLM and SGLang do (bench/engine-upstream.ts).
// Each module reads its own flags from the command line.
if (process.argv.includes('--engine')) await import('./engine-upstream.js');
else await import('./fixed-latency-upstream.js');
