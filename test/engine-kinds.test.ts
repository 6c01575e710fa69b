import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BUILTIN_KIND, HTTP_ENGINE_KINDS, kindsThatReload, loadGaugeNames } from '../src/engine/engine-kinds.js';
import { metricsUrlOf, readFleetSpec } from '../src/engine/fleet-config.js';
import { HttpReplica } from '../src/engine/http-replica.js';

const directory = mkdtempSync(join(tmpdir(), 'spool-engine-kinds-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** A FLEET_FILE with one replica of `kind`, read as the service reads it. */
function fleetOf(kind: string) {
  const path = join(directory, `${kind}.json`);
  writeFileSync(path, JSON.stringify({ models: { m: { replicas: [{ kind, ...(kind === BUILTIN_KIND ? {} : { base_url: 'http://127.0.0.1:9/v1' }) }] } } }));
  return readFleetSpec(path);
}

describe('the engine kinds table', () => {
  it('names every kind FLEET_FILE accepts, and FLEET_FILE refuses a kind it does not name', () => {
    for (const kind of [BUILTIN_KIND, ...Object.keys(HTTP_ENGINE_KINDS)]) expect(fleetOf(kind).models.m!.replicas[0]!.kind).toBe(kind);
    expect(() => fleetOf('tgi')).toThrow(/FLEET_FILE/);
  });

  it('reads the load gauges of every kind that publishes them, each kind in the table order', () => {
    expect(loadGaugeNames().running).toEqual(['vllm:num_requests_running', 'sglang:num_running_reqs']);
    expect(loadGaugeNames().kvUsage).toEqual(['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc', 'sglang:token_usage']);
  });

  it('refuses to reload a server whose kind has no reload, naming the kinds that have one', async () => {
    expect(kindsThatReload()).toEqual(['vllm', 'sglang']);
    const replica = new HttpReplica('generic', 'openai', 'http://127.0.0.1:9/v1', { timeoutMs: 1000 });
    await expect(replica.reload({ path: directory, location: 's3://bucket/weights' })).rejects.toThrow(
      'generic: a generic OpenAI-compatible server has no weight reload; use kind vllm or sglang',
    );
  });

  it('reads the gauges of a kind that publishes them at its base URL’s origin unless told otherwise, and not at all when told false', () => {
    expect(metricsUrlOf({ kind: 'vllm', base_url: 'http://10.0.0.5:8000/v1' })).toBe('http://10.0.0.5:8000/metrics');
    expect(metricsUrlOf({ kind: 'sglang', base_url: 'https://engine.example/v1/' })).toBe('https://engine.example/metrics');
    expect(metricsUrlOf({ kind: 'vllm', base_url: 'http://10.0.0.5:8000/v1', metrics_url: 'http://10.0.0.5:9090/metrics' })).toBe('http://10.0.0.5:9090/metrics');
    expect(metricsUrlOf({ kind: 'vllm', base_url: 'http://10.0.0.5:8000/v1', metrics_url: false })).toBeUndefined();
    // A generic server is assumed to publish nothing.
    expect(metricsUrlOf({ kind: 'openai', base_url: 'http://10.0.0.5:8000/v1' })).toBeUndefined();
    const spec = fleetOf('vllm');
    expect(spec.models.m!.replicas[0]!.metrics_url).toBeUndefined();
  });
});
