import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BUILTIN_KIND, HTTP_ENGINE_KINDS, kindsThatReload, loadGaugeNames } from '../src/engine/engine-kinds.js';
import { readFleetSpec } from '../src/engine/fleet-config.js';
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
});
