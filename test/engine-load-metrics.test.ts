import { describe, expect, it } from 'vitest';
import { engineLoadFrom, parsePrometheusText } from '../src/engine/engine-load-metrics.js';

const vllm = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 12.0
vllm:num_requests_running{engine="1",model_name="qwen"} 4.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen"} 3.0
vllm:num_requests_waiting{engine="1",model_name="qwen"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.42
vllm:kv_cache_usage_perc{engine="1",model_name="qwen"} 0.87
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="qwen"} 1024 1700000000000
`;

describe('engine load metrics', () => {
  it('reads vLLM gauges: counts summed over engines, the KV cache at its fullest engine', () => {
    expect(engineLoadFrom(vllm)).toEqual({ running: 16, waiting: 3, kvUsage: 0.87 });
  });

  it('falls back to the older vllm:gpu_cache_usage_perc', () => {
    expect(engineLoadFrom('vllm:gpu_cache_usage_perc{model_name="m"} 0.5\nvllm:num_requests_waiting 0\n')).toEqual({ waiting: 0, kvUsage: 0.5 });
  });

  it('reads SGLang gauges', () => {
    const text = `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 8
sglang:num_queue_reqs{model_name="m",tp_rank="0"} 4
sglang:token_usage{model_name="m",tp_rank="0"} 0.52
`;
    expect(engineLoadFrom(text)).toEqual({ running: 8, waiting: 4, kvUsage: 0.52 });
  });

  it('parses labels with quotes, commas, braces and escapes, timestamps and special values', () => {
    const samples = parsePrometheusText(
      'a{path="/x,{y}",quote="say \\"hi\\"\\n"} 1.5e2 1700000000\nb +Inf\nc NaN\nd{} -3\n',
    );
    expect(samples).toEqual([
      { name: 'a', labels: { path: '/x,{y}', quote: 'say "hi"\n' }, value: 150 },
      { name: 'b', labels: {}, value: Number.POSITIVE_INFINITY },
      { name: 'c', labels: {}, value: Number.NaN },
      { name: 'd', labels: {}, value: -3 },
    ]);
  });

  it('skips malformed lines instead of failing, and a page without these gauges gives nothing', () => {
    const text = 'garbage line here\nvllm:num_requests_running{model_name="m" 3\nvllm:num_requests_waiting{x="1"} notanumber\n\u0000\u0001\nvllm:num_requests_running 2\n';
    expect(engineLoadFrom(text)).toEqual({ running: 2 });
    expect(engineLoadFrom('<html>not metrics</html>')).toEqual({});
    expect(engineLoadFrom('')).toEqual({});
  });
});
