import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../src/config.js';
import { readFleetSpec } from '../src/engine/fleet-config.js';
import { PROCESSOR_KINDS } from '../src/message-log/topics.js';
import { packageRoot } from '../src/package-root.js';
import { tempDir } from './support/service.js';

/**
 * No container engine runs here, so the manifests in deploy/ are checked for what can be checked
 * without one: every Spool command they run exists, every variable they set is read by the code
 * and documented in the README, the values pass the service's own configuration check, and the
 * probes point at /live and /ready.
 */

interface SpoolContainer {
  readonly where: string;
  readonly command: string[];
  readonly env: Record<string, string>;
  readonly liveness?: string;
  readonly readiness?: string;
}

const read = (path: string) => readFileSync(join(packageRoot, path), 'utf8');
const SPOOL_IMAGE = 'spool:latest';
// Read by the AWS SDK's credential chain rather than by Spool's own configuration.
const READ_BY_AWS_SDK = new Set(['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']);

function composeContainers(): SpoolContainer[] {
  const compose = parse(read('deploy/compose.yaml'), { merge: true }) as { services: Record<string, any>; volumes: Record<string, unknown> };
  return Object.entries(compose.services)
    .filter(([, service]) => service.image === SPOOL_IMAGE)
    .map(([name, service]) => ({
      where: `compose ${name}`,
      command: service.command,
      env: Object.fromEntries(Object.entries(service.environment as Record<string, unknown>).map(([key, value]) => [key, String(value).replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1')])),
      readiness: (service.healthcheck?.test as string[] | undefined)?.join(' '),
    }));
}

function kubernetesContainers(): { containers: SpoolContainer[]; fleetJson: string[] } {
  const documents = readdirSync(join(packageRoot, 'deploy/k8s'))
    .filter((name) => name.endsWith('.yaml'))
    .flatMap((name) => parseAllDocuments(read(`deploy/k8s/${name}`)).map((document) => document.toJS() as any));
  const configMaps = new Map<string, Record<string, string>>(documents.filter((d) => d.kind === 'ConfigMap').map((d) => [d.metadata.name, d.data]));
  const secrets = new Map<string, Record<string, string>>(documents.filter((d) => d.kind === 'Secret').map((d) => [d.metadata.name, d.stringData]));
  const containers: SpoolContainer[] = [];
  for (const workload of documents.filter((d) => d.kind === 'Deployment' || d.kind === 'StatefulSet')) {
    for (const container of workload.spec.template.spec.containers) {
      if (container.image !== SPOOL_IMAGE) continue;
      const env: Record<string, string> = {};
      for (const source of container.envFrom ?? []) {
        const values = source.configMapRef ? configMaps.get(source.configMapRef.name) : secrets.get(source.secretRef.name);
        expect(values, `${workload.metadata.name}: envFrom names a missing ConfigMap or Secret`).toBeDefined();
        for (const [key, value] of Object.entries(values!)) if (/^[A-Z0-9_]+$/.test(key)) env[key] = value;
      }
      for (const entry of container.env ?? []) env[entry.name] = entry.value;
      containers.push({
        where: `k8s ${workload.metadata.name}`,
        command: container.command,
        env,
        liveness: container.livenessProbe?.httpGet?.path,
        readiness: container.readinessProbe?.httpGet?.path,
      });
    }
  }
  const fleetJson = [...configMaps.values()].map((data) => data['fleet.json']).filter((text): text is string => typeof text === 'string');
  return { containers, fleetJson };
}

const compose = composeContainers();
const kubernetes = kubernetesContainers();
const all = [...compose, ...kubernetes.containers];
const sourceText = execFileSync('git', ['ls-files', 'src', 'processors', 'projections'], { cwd: packageRoot, encoding: 'utf8' })
  .split('\n')
  .filter((path) => path.endsWith('.ts'))
  .map(read)
  .join('\n');
const readme = read('README.md');

describe('deploy/ manifests', () => {
  it('run every role: the API, the relay and each processor kind, in compose and in Kubernetes', () => {
    for (const containers of [compose, kubernetes.containers]) {
      const roles = containers.map((container) => container.command.slice(2).join(' ')).sort();
      expect(roles).toEqual(['processor checkpoint', 'processor finalizer', 'processor inference', 'processor validator', 'relay', 'serve'].sort());
    }
  });

  it('run only commands the CLI has', () => {
    const help = execFileSync(process.execPath, [join(packageRoot, 'dist/src/cli.js'), 'help'], { encoding: 'utf8' });
    const commands = new Set([...help.matchAll(/^ {2}([a-z]+)\b/gm)].map((match) => match[1]));
    for (const container of all) {
      expect(container.command.slice(0, 2), container.where).toEqual(['node', 'dist/src/cli.js']);
      const [command, ...args] = container.command.slice(2);
      expect(commands, container.where).toContain(command);
      expect(readme, `README mentions spool ${command}`).toContain(`spool ${command}`);
      if (command === 'processor') expect(PROCESSOR_KINDS, container.where).toContain(args[0]);
    }
  });

  it('set only variables the code reads and the README documents, with values the service accepts', () => {
    for (const container of all) {
      for (const name of Object.keys(container.env)) {
        if (!READ_BY_AWS_SDK.has(name)) expect(sourceText.includes(`'${name}'`), `${container.where}: ${name} is not read by the code`).toBe(true);
        expect(readme.includes(`\`${name}\``), `${container.where}: ${name} is not in the README`).toBe(true);
      }
      const config = loadConfig(container.env, '/app');
      // Processes of their own need a durable, shared message log and event store.
      expect(config.kafka?.brokers.length, container.where).toBeGreaterThan(0);
      expect(config.eventStoreUrl, container.where).toMatch(/^esdb:\/\//);
      expect(config.blobStore?.bucket, container.where).toBe('spool');
    }
  });

  it('probe /live and /ready', () => {
    for (const container of kubernetes.containers) {
      expect(container.liveness, container.where).toBe('/live');
      expect(container.readiness, container.where).toBe('/ready');
    }
    for (const container of compose) expect(container.readiness, container.where).toContain('/ready');
  });

  it('describe a fleet the service accepts', () => {
    const directory = tempDir('fleet');
    const texts = [read('deploy/fleet.json'), ...kubernetes.fleetJson];
    expect(texts.length).toBeGreaterThanOrEqual(2);
    texts.forEach((text, index) => {
      const path = join(directory, `fleet-${index}.json`);
      writeFileSync(path, text);
      expect(Object.keys(readFleetSpec(path).models)).toEqual(['tiny-chat']);
    });
  });
});
