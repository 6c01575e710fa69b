import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compiledSchemaFile, describeMismatch, httpSchema, readJsonFile, schemaFile, schemaNames, schemaProblems } from '../src/platform/schemas.js';

describe('the schema loader', () => {
  it('compiles every schema in schemas/ for checking, strict', () => {
    for (const folder of ['events', 'messages', 'config'] as const) {
      expect(schemaNames(folder).length, folder).toBeGreaterThan(0);
      for (const name of schemaNames(folder)) expect(() => compiledSchemaFile(folder, name), `${folder}/${name}`).not.toThrow();
    }
  });

  it('inlines references to other schema files, beside it and in another folder', () => {
    expect((httpSchema('FileList').properties as { data: { items: unknown } }).data.items).toEqual(httpSchema('File'));
    expect(schemaFile('config', 'jobs').items).toEqual(httpSchema('ReserveJobRequest'));
  });

  it('words a value that breaks its schema one way: <where>: <instancePath> <message>; …', () => {
    const validate = compiledSchemaFile('events', 'FileDeleted.v1');
    expect(validate({ file_id: 'file-1', deleted_at: 'yesterday' })).toBe(false);
    expect(describeMismatch('event FileDeleted v1 does not match its schema', schemaProblems(validate.errors))).toBe(
      'event FileDeleted v1 does not match its schema: /deleted_at must be integer',
    );
    expect(validate([])).toBe(false);
    expect(schemaProblems(validate.errors)).toEqual(['/ must be object']);
  });

  it('reads a configured file against its schema in schemas/config, naming the setting, the path and every problem', () => {
    const directory = mkdtempSync(join(tmpdir(), 'schemas-'));
    const fleet = join(directory, 'fleet.json');
    writeFileSync(fleet, JSON.stringify({ models: { m: { replicas: [{ kind: 'vllm' }, { kind: 'builtin', base_url: 'http://x' }] } } }));
    expect(() => readJsonFile(fleet, 'fleet', 'FLEET_FILE')).toThrow(
      `FLEET_FILE ${fleet}: /models/m/replicas/0 must have required property 'base_url'; /models/m/replicas/0 must match "else" schema; /models/m/replicas/1 must NOT be valid; /models/m/replicas/1 must match "then" schema`,
    );
    writeFileSync(fleet, JSON.stringify({ models: { m: { replicas: [{ kind: 'sglang', base_url: 'http://x' }, { kind: 'builtin' }] } } }));
    expect(readJsonFile(fleet, 'fleet', 'FLEET_FILE')).toEqual({ models: { m: { replicas: [{ kind: 'sglang', base_url: 'http://x' }, { kind: 'builtin' }] } } });
    const jobs = join(directory, 'jobs.json');
    writeFileSync(jobs, '[{"job_id": ');
    expect(() => readJsonFile(jobs, 'jobs', 'JOBS_FILE')).toThrow(new RegExp(`^JOBS_FILE ${jobs} cannot be read as JSON: `));
  });
});
