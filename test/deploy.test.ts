import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../src/config.js';
import { readFleetSpec } from '../src/engine/fleet-config.js';
import { PROCESSOR_KINDS } from '../src/messages/topics.js';
import { packageRoot } from '../src/platform/package-root.js';
import { tempDir } from './support/service.js';

/**
 * No container engine runs here, so the manifests in deploy/ are checked for what can be checked
 * without one: every Spool command they run exists, every variable they set is read by the code
 * and documented in the README, the values pass the service's own configuration check, the
 * probes point at /live and /ready, and every container is hardened the way a platform team
 * expects (unprivileged numeric user, read-only root, no capabilities, requests and limits,
 * state on volumes, secrets referenced rather than shipped).
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
// What a secret reference stands for when the values are checked: the real value is the operator's.
const SECRET_STAND_IN = 'a-secret-the-operator-provides';
// Compose: `${NAME:-default}` is the default; `${NAME:?message}` must come from the environment.
const composeValue = (value: unknown) =>
  String(value)
    .replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1')
    .replace(/\$\{[A-Z0-9_]+:\?[^}]*\}/g, SECRET_STAND_IN);
// Read by the AWS SDK's credential chain rather than by Spool's own configuration.
const READ_BY_AWS_SDK = new Set(['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']);

const composeFile = parse(read('deploy/compose.yaml'), { merge: true }) as { services: Record<string, any>; volumes: Record<string, unknown> };

function composeContainers(): SpoolContainer[] {
  return Object.entries(composeFile.services)
    .filter(([, service]) => service.image === SPOOL_IMAGE)
    .map(([name, service]) => ({
      where: `compose ${name}`,
      command: service.command,
      env: Object.fromEntries(Object.entries(service.environment as Record<string, unknown>).map(([key, value]) => [key, composeValue(value)])),
      readiness: (service.healthcheck?.test as string[] | undefined)?.join(' '),
    }));
}

const kubernetesDocuments: any[] = readdirSync(join(packageRoot, 'deploy/k8s'))
  .filter((name) => name.endsWith('.yaml'))
  .flatMap((name) => parseAllDocuments(read(`deploy/k8s/${name}`)).map((document) => document.toJS() as any));
const workloads = kubernetesDocuments.filter((d) => ['Deployment', 'StatefulSet', 'Job'].includes(d.kind));
const longRunning = workloads.filter((d) => d.kind !== 'Job');

function kubernetesContainers(): { containers: SpoolContainer[]; fleetJson: string[] } {
  const configMaps = new Map<string, Record<string, string>>(kubernetesDocuments.filter((d) => d.kind === 'ConfigMap').map((d) => [d.metadata.name, d.data]));
  const containers: SpoolContainer[] = [];
  for (const workload of kubernetesDocuments.filter((d) => d.kind === 'Deployment' || d.kind === 'StatefulSet')) {
    for (const container of workload.spec.template.spec.containers) {
      if (container.image !== SPOOL_IMAGE) continue;
      const env: Record<string, string> = {};
      for (const source of container.envFrom ?? []) {
        expect(source.configMapRef, `${workload.metadata.name}: envFrom takes only ConfigMaps (secrets are single secretKeyRefs)`).toBeDefined();
        const values = configMaps.get(source.configMapRef.name);
        expect(values, `${workload.metadata.name}: envFrom names a missing ConfigMap`).toBeDefined();
        for (const [key, value] of Object.entries(values!)) if (/^[A-Z0-9_]+$/.test(key)) env[key] = value;
      }
      for (const entry of container.env ?? []) env[entry.name] = entry.valueFrom?.secretKeyRef ? SECRET_STAND_IN : entry.value;
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
    const help = execFileSync(process.execPath, [join(packageRoot, 'dist/src/process/cli.js'), 'help'], { encoding: 'utf8' });
    const commands = new Set([...help.matchAll(/^ {2}([a-z]+)\b/gm)].map((match) => match[1]));
    for (const container of all) {
      expect(container.command.slice(0, 2), container.where).toEqual(['node', 'dist/src/process/cli.js']);
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
      // PostgreSQL, the store the tests run on; its password from a secret, not in the URL.
      expect(config.eventStoreUrl, container.where).toMatch(/^postgres:\/\/spool@postgres:5432\/spool$/);
      expect(config.eventStorePassword, `${container.where}: PGPASSWORD`).toBeDefined();
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

  it('annotate every Spool pod for Prometheus to scrape /metrics on its HTTP port', () => {
    for (const workload of kubernetesDocuments.filter((d) => (d.kind === 'Deployment' || d.kind === 'StatefulSet') && d.spec.template.spec.containers.some((c: any) => c.image === SPOOL_IMAGE))) {
      const annotations = workload.spec.template.metadata.annotations ?? {};
      const port = workload.spec.template.spec.containers.find((c: any) => c.image === SPOOL_IMAGE).ports?.[0]?.containerPort;
      expect(annotations['prometheus.io/scrape'], workload.metadata.name).toBe('true');
      expect(annotations['prometheus.io/path'], workload.metadata.name).toBe('/metrics');
      expect(annotations['prometheus.io/port'], workload.metadata.name).toBe(String(port));
    }
  });

  it('pull every image other than Spool’s own at a named release: none at latest, none untagged', () => {
    const images = [
      ...Object.entries(composeFile.services).filter(([, service]) => service.image).map(([name, service]) => ({ where: `compose ${name}`, image: String(service.image) })),
      ...workloads.flatMap((workload) => [...(podSpec(workload).initContainers ?? []), ...podSpec(workload).containers].map((container: any) => ({ where: `${workload.kind} ${workload.metadata.name}`, image: String(container.image) }))),
    ].filter(({ image }) => image !== SPOOL_IMAGE);
    expect(images.length).toBeGreaterThan(5);
    // The tag is what follows the last colon after the last slash (a registry's port is before it).
    for (const { where, image } of images) expect(image.split('/').at(-1)!.split(':')[1] ?? 'untagged', `${where}: ${image}`).toMatch(/^(?!latest$)[\w][\w.-]*$/);
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

// Where each stateful part keeps what must outlive its container: PostgreSQL's and Kafka's logs,
// MinIO's objects, the relay's checkpoint, and the checkpoints staged for the inference servers.
const STATE_PATHS: Record<string, string[]> = {
  postgres: ['/var/lib/postgresql/data'],
  kafka: ['/var/lib/kafka/data'],
  minio: ['/data'],
  'spool-relay': ['/data'],
  'spool-checkpoint': ['/data/staging'],
  'inference-engine': ['/data/staging'],
};
// Variables whose values are secrets: never written into the manifests.
const SECRET_VARIABLES = ['API_KEY', 'AWS_SECRET_ACCESS_KEY', 'MINIO_ROOT_PASSWORD', 'PGPASSWORD', 'POSTGRES_PASSWORD'];

const podSpec = (workload: any) => workload.spec.template.spec;
const containersOf = (workload: any): any[] => [...(podSpec(workload).initContainers ?? []), ...podSpec(workload).containers];
const shutdownTimeoutSeconds = (env: Record<string, string>, where: string) => {
  expect(env.SHUTDOWN_TIMEOUT_SECONDS ?? 'unset', `${where}: SHUTDOWN_TIMEOUT_SECONDS is set explicitly`).toMatch(/^\d+$/);
  return Number(env.SHUTDOWN_TIMEOUT_SECONDS);
};
const seconds = (duration: string) => {
  const match = /^(\d+)(s|m)$/.exec(duration);
  expect(match, `a duration like 30s or 1m: ${duration}`).not.toBeNull();
  return Number(match![1]) * (match![2] === 'm' ? 60 : 1);
};
const composeMountTarget = (mount: string) => (mount.includes(':') ? mount.split(':')[1] : mount);
const composeNamedVolume = (mount: string) => (mount.includes(':') && !mount.startsWith('.') && !mount.startsWith('/') ? mount.split(':')[0] : undefined);
// A one-shot that only hands fresh volumes to the unprivileged user: root, but with CHOWN alone.
const isChownOneShot = (service: any) =>
  service.restart === undefined && service.command?.[0] === 'chown' && JSON.stringify(service.cap_add) === '["CHOWN"]';

describe('deploy/ hardening, Kubernetes', () => {
  it('runs every container as an unprivileged numeric user, read-only, with no privilege escalation or capabilities, under RuntimeDefault seccomp', () => {
    expect(workloads.length).toBeGreaterThanOrEqual(10);
    for (const workload of workloads) {
      const pod = podSpec(workload).securityContext ?? {};
      for (const container of containersOf(workload)) {
        const where = `${workload.metadata.name}/${container.name}`;
        const context = container.securityContext ?? {};
        expect(context.runAsNonRoot ?? pod.runAsNonRoot, `${where}: runAsNonRoot`).toBe(true);
        const user = context.runAsUser ?? pod.runAsUser;
        expect(Number.isInteger(user) && user > 0, `${where}: numeric runAsUser other than 0, got ${user}`).toBe(true);
        expect(context.readOnlyRootFilesystem, `${where}: readOnlyRootFilesystem`).toBe(true);
        expect(context.allowPrivilegeEscalation, `${where}: allowPrivilegeEscalation`).toBe(false);
        expect(context.privileged ?? false, `${where}: privileged`).toBe(false);
        expect(context.capabilities?.drop, `${where}: capabilities dropped`).toContain('ALL');
        expect(context.capabilities?.add ?? [], `${where}: capabilities added`).toEqual([]);
        expect((context.seccompProfile ?? pod.seccompProfile)?.type, `${where}: seccomp`).toBe('RuntimeDefault');
      }
    }
  });

  it('gives every container CPU and memory requests and limits', () => {
    for (const workload of workloads) {
      for (const container of containersOf(workload)) {
        const where = `${workload.metadata.name}/${container.name}`;
        for (const bound of ['requests', 'limits']) {
          expect(container.resources?.[bound]?.cpu, `${where}: resources.${bound}.cpu`).toBeDefined();
          expect(container.resources?.[bound]?.memory, `${where}: resources.${bound}.memory`).toBeDefined();
        }
      }
    }
  });

  it('probes every long-running container for startup, liveness and readiness; Spool on /live and /ready', () => {
    for (const workload of longRunning) {
      for (const container of podSpec(workload).containers) {
        const where = `${workload.metadata.name}/${container.name}`;
        for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) expect(container[probe], `${where}: ${probe}`).toBeDefined();
        if (container.image !== SPOOL_IMAGE) continue;
        expect(container.startupProbe.httpGet?.path, where).toBe('/live');
        expect(container.livenessProbe.httpGet?.path, where).toBe('/live');
        expect(container.readinessProbe.httpGet?.path, where).toBe('/ready');
      }
    }
  });

  it('gives Spool pods a grace period longer than the shutdown bound they are configured with', () => {
    const byName = new Map(longRunning.map((workload) => [workload.metadata.name, workload]));
    expect(kubernetes.containers.length).toBe(6);
    for (const container of kubernetes.containers) {
      const workload = byName.get(container.where.replace(/^k8s /, ''));
      const grace = podSpec(workload).terminationGracePeriodSeconds;
      expect(grace, `${container.where}: terminationGracePeriodSeconds`).toBeGreaterThan(shutdownTimeoutSeconds(container.env, container.where));
    }
  });

  it('lets Spool containers retry their dependencies for STARTUP_TIMEOUT_SECONDS before the startup probe gives up', () => {
    // /live answers only once the event store and Kafka were reached, which may take the whole
    // start-up deadline: a shorter startup probe would restart a pod that is still waiting.
    const byName = new Map(longRunning.map((workload) => [workload.metadata.name, workload]));
    for (const container of kubernetes.containers) {
      const workload = byName.get(container.where.replace(/^k8s /, ''));
      const spec = podSpec(workload).containers.find((candidate: any) => candidate.image === SPOOL_IMAGE);
      expect(container.env.STARTUP_TIMEOUT_SECONDS ?? 'unset', `${container.where}: STARTUP_TIMEOUT_SECONDS is set explicitly`).toMatch(/^\d+$/);
      const probe = spec.startupProbe;
      const patience = (probe.periodSeconds ?? 10) * (probe.failureThreshold ?? 3) + (probe.initialDelaySeconds ?? 0);
      expect(patience, `${container.where}: startupProbe period × failureThreshold`).toBeGreaterThan(Number(container.env.STARTUP_TIMEOUT_SECONDS));
    }
  });

  it('ships no secret values: no Secret with data, secrets read through secretKeyRef from the Secret deploy/README.md creates', () => {
    for (const secret of kubernetesDocuments.filter((d) => d.kind === 'Secret')) {
      expect(secret.data ?? secret.stringData, `Secret ${secret.metadata.name} carries inline values`).toBeUndefined();
    }
    const deployReadme = read('deploy/README.md');
    const keys = new Set<string>();
    for (const workload of workloads) {
      for (const container of containersOf(workload)) {
        for (const entry of container.env ?? []) {
          if (SECRET_VARIABLES.includes(entry.name)) expect(entry.valueFrom?.secretKeyRef, `${workload.metadata.name}: ${entry.name} is inline`).toBeDefined();
          const reference = entry.valueFrom?.secretKeyRef;
          if (!reference) continue;
          expect(kubernetesDocuments.some((d) => d.kind === 'Secret' && d.metadata.name === reference.name), `${reference.name} is the operator's, not shipped`).toBe(false);
          expect(deployReadme, `deploy/README.md creates ${reference.name}`).toContain(`kubectl create secret generic ${reference.name}`);
          keys.add(reference.key);
        }
      }
    }
    expect([...keys].sort()).toEqual(['api-key', 'postgres-password', 's3-access-key', 's3-secret-key']);
    for (const key of keys) expect(deployReadme, `deploy/README.md sets ${key}`).toContain(`--from-literal=${key}=`);
    for (const container of kubernetes.containers) {
      for (const name of SECRET_VARIABLES.filter((variable) => variable in container.env)) expect(container.env[name], `${container.where}: ${name}`).toBe(SECRET_STAND_IN);
    }
  });

  it('keeps every stateful part on a persistent volume', () => {
    for (const workload of longRunning) {
      const pod = podSpec(workload);
      const claimed = new Set<string>([
        ...(workload.spec.volumeClaimTemplates ?? []).map((template: any) => template.metadata.name),
        ...(pod.volumes ?? []).filter((volume: any) => volume.persistentVolumeClaim).map((volume: any) => volume.name),
      ]);
      const mounts = pod.containers.flatMap((container: any) => container.volumeMounts ?? []);
      if (workload.kind === 'StatefulSet') {
        expect(workload.spec.volumeClaimTemplates?.length ?? 0, `${workload.metadata.name}: volumeClaimTemplates`).toBeGreaterThan(0);
        for (const template of workload.spec.volumeClaimTemplates) expect(mounts.map((mount: any) => mount.name), workload.metadata.name).toContain(template.metadata.name);
      }
      for (const path of STATE_PATHS[workload.metadata.name] ?? []) {
        const mount = mounts.find((candidate: any) => candidate.mountPath === path);
        expect(mount && claimed.has(mount.name), `${workload.metadata.name}: ${path} on a PersistentVolumeClaim`).toBe(true);
      }
      for (const container of pod.containers) {
        const logDirs = container.env?.find((entry: any) => entry.name === 'KAFKA_LOG_DIRS')?.value;
        if (container.image.startsWith('apache/kafka')) expect(logDirs ?? 'unset', 'KAFKA_LOG_DIRS on the volume (the image defaults to /tmp)').toMatch(/^\/var\/lib\/kafka\/data\//);
      }
    }
    for (const name of Object.keys(STATE_PATHS)) expect(longRunning.map((workload) => workload.metadata.name), name).toContain(name);
  });
});

describe('deploy/ hardening, compose', () => {
  const services = Object.entries(composeFile.services);

  it('runs every service as an unprivileged numeric user with a read-only root, no capabilities and no new privileges', () => {
    for (const [name, service] of services) {
      expect(service.read_only, `${name}: read_only`).toBe(true);
      expect(service.cap_drop, `${name}: cap_drop`).toContain('ALL');
      expect(service.security_opt, `${name}: security_opt`).toContain('no-new-privileges:true');
      if (isChownOneShot(service)) continue;
      expect(service.cap_add ?? [], `${name}: cap_add`).toEqual([]);
      expect(String(service.user), `${name}: user`).toMatch(/^[1-9]\d*(:\d+)?$/);
    }
  });

  it('bounds every service\'s CPU and memory, and health-checks every long-running one', () => {
    for (const [name, service] of services) {
      for (const bound of ['limits', 'reservations']) {
        expect(service.deploy?.resources?.[bound]?.cpus, `${name}: deploy.resources.${bound}.cpus`).toBeDefined();
        expect(service.deploy?.resources?.[bound]?.memory, `${name}: deploy.resources.${bound}.memory`).toBeDefined();
      }
      if (service.restart === 'unless-stopped' || service.restart === 'always') expect(service.healthcheck?.test, `${name}: healthcheck`).toBeDefined();
    }
  });

  it('gives Spool services a stop grace period longer than their shutdown bound', () => {
    for (const [name, service] of services.filter(([, service]) => service.image === SPOOL_IMAGE)) {
      expect(seconds(service.stop_grace_period ?? '10s'), `${name}: stop_grace_period`).toBeGreaterThan(shutdownTimeoutSeconds(service.environment, name));
    }
  });

  it('takes secrets from the environment, not from the file', () => {
    for (const [name, service] of services) {
      for (const variable of SECRET_VARIABLES.filter((key) => key in (service.environment ?? {}))) {
        expect(String(service.environment[variable]), `${name}: ${variable}`).toMatch(/^\$\{[A-Z0-9_]+:\?[^}]+\}$/);
      }
    }
  });

  it('keeps every stateful part on a named volume, and each Spool DATA_DIR on a volume', () => {
    for (const [name, paths] of Object.entries(STATE_PATHS)) {
      const service = composeFile.services[name];
      expect(service, name).toBeDefined();
      for (const path of paths) {
        const mount = (service.volumes ?? []).find((candidate: string) => composeMountTarget(candidate) === path);
        const volume = mount && composeNamedVolume(mount);
        expect(volume && volume in composeFile.volumes, `${name}: ${path} on a named volume`).toBe(true);
      }
    }
    for (const [name, service] of services.filter(([, service]) => service.image === SPOOL_IMAGE)) {
      expect((service.volumes as string[]).map(composeMountTarget), `${name}: DATA_DIR on a volume`).toContain(service.environment.DATA_DIR);
    }
    expect(composeFile.services.kafka.environment.KAFKA_LOG_DIRS ?? 'unset', 'KAFKA_LOG_DIRS on the volume (the image defaults to /tmp)').toMatch(/^\/var\/lib\/kafka\/data\//);
  });
});

describe('deploy/Dockerfile', () => {
  const dockerfile = read('deploy/Dockerfile');
  const instructions = dockerfile.split('\n').filter((line) => /^[A-Z]+\s/.test(line));

  it('builds on Node 24 and runs as an unprivileged numeric user', () => {
    const bases = instructions.filter((line) => line.startsWith('FROM '));
    expect(bases.length).toBeGreaterThan(0);
    for (const base of bases) expect(base, 'every stage on Node 24').toMatch(/^FROM node:24[-\s]/);
    const lastStage = instructions.slice(instructions.lastIndexOf(bases.at(-1)!));
    const users = lastStage.filter((line) => line.startsWith('USER '));
    expect(users.length, 'USER in the final stage').toBeGreaterThan(0);
    const user = users.at(-1)!.slice('USER '.length).trim();
    expect(user, 'a numeric user, so that runAsNonRoot can verify it').toMatch(/^\d+(:\d+)?$/);
    expect(Number(user.split(':')[0]), 'not root').toBeGreaterThan(0);
  });

  it('has a .dockerignore beside the build context that leaves out dependencies, build output, local data, caches and git', () => {
    const ignored = read('.dockerignore').split('\n').map((line) => line.trim()).filter((line) => line && !line.startsWith('#'));
    for (const entry of ['node_modules', '.git', 'data', '.cache']) expect(ignored, entry).toContain(entry);
  });
});

// The Kubernetes manifests as the kustomize base an operator applies (`kubectl apply -k deploy/k8s`),
// rendered by kubectl itself where it is installed.
const kubectl = (() => {
  try {
    execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!kubectl)(`deploy/k8s as a kustomize base${kubectl ? '' : ' (skipped: no kubectl on this machine)'}`, () => {
  const rendered = () => parseAllDocuments(execFileSync('kubectl', ['kustomize', join(packageRoot, 'deploy/k8s')], { encoding: 'utf8' })).map((document) => document.toJS() as any);

  it('renders every manifest into the namespace spool, with the namespace itself', () => {
    const documents = rendered();
    const namespace = documents.find((d) => d.kind === 'Namespace');
    expect(namespace?.metadata.name).toBe('spool');
    expect(namespace?.metadata.labels['pod-security.kubernetes.io/enforce']).toBeDefined();
    for (const document of documents.filter((d) => d.kind !== 'Namespace')) expect(document.metadata.namespace, `${document.kind} ${document.metadata.name}`).toBe('spool');
    // Everything the plain files hold is in the base.
    const names = new Set(documents.map((d) => `${d.kind}/${d.metadata.name}`));
    for (const document of kubernetesDocuments.filter((d) => d.kind && d.kind !== 'Kustomization')) expect(names, `${document.kind}/${document.metadata.name}`).toContain(`${document.kind}/${document.metadata.name}`);
  });

  it('lets nothing in but the API port, traffic within the namespace and the metrics scrape', () => {
    const policies = rendered().filter((d) => d.kind === 'NetworkPolicy');
    const denyAll = policies.find((p) => Object.keys(p.spec.podSelector).length === 0 && p.spec.policyTypes.includes('Ingress') && !p.spec.ingress);
    expect(denyAll, 'a default deny of ingress').toBeDefined();
    const api = policies.find((p) => p.spec.podSelector.matchLabels?.role === 'api');
    const apiDeployment = workloads.find((d) => d.metadata.name === 'spool-api');
    const apiPort = apiDeployment.spec.template.spec.containers[0].ports[0].containerPort;
    expect(api.spec.ingress[0].ports).toEqual([{ protocol: 'TCP', port: apiPort }]);
    const scrape = policies.find((p) => p.metadata.name === 'spool-metrics-scrape');
    expect(scrape.spec.podSelector.matchLabels).toEqual({ app: 'spool' });
    // Every Spool pod serves /metrics on the port its annotation names, which the policy opens.
    for (const workload of longRunning.filter((d) => d.spec.template.metadata.labels.app === 'spool')) {
      expect(String(scrape.spec.ingress[0].ports[0].port)).toBe(workload.spec.template.metadata.annotations['prometheus.io/port']);
    }
  });

  it('keeps a disruption budget on every Spool role that runs more than one replica, each selecting its pods', () => {
    const documents = rendered();
    const budgets = documents.filter((d) => d.kind === 'PodDisruptionBudget');
    const deployments = documents.filter((d) => d.kind === 'Deployment' && d.spec.template.metadata.labels.app === 'spool');
    for (const deployment of deployments.filter((d) => d.spec.replicas > 1)) {
      const labels = deployment.spec.template.metadata.labels;
      const budget = budgets.find((b) => Object.entries(b.spec.selector.matchLabels).every(([key, value]) => labels[key] === value));
      expect(budget, `a budget for ${deployment.metadata.name}`).toBeDefined();
      expect(budget.spec.maxUnavailable ?? deployment.spec.replicas - budget.spec.minAvailable).toBeLessThan(deployment.spec.replicas);
    }
    // No budget selects nothing.
    for (const budget of budgets) expect(deployments.some((d) => Object.entries(budget.spec.selector.matchLabels).every(([key, value]) => d.spec.template.metadata.labels[key] === value)), budget.metadata.name).toBe(true);
  });

  it('gives the API the jobs to reserve from a generated ConfigMap, a JOBS_FILE the service reads', async () => {
    const documents = rendered();
    const api = documents.find((d) => d.kind === 'Deployment' && d.metadata.name === 'spool-api');
    const container = api.spec.template.spec.containers[0];
    const jobsFile = container.env.find((e: any) => e.name === 'JOBS_FILE').value as string;
    const mount = container.volumeMounts.find((m: any) => jobsFile.startsWith(`${m.mountPath}/`));
    const volume = api.spec.template.spec.volumes.find((v: any) => v.name === mount.name);
    const configMap = documents.find((d) => d.kind === 'ConfigMap' && d.metadata.name === volume.configMap.name);
    expect(configMap.metadata.name).toMatch(/^spool-jobs-[a-z0-9]+$/);
    const file = join(tempDir('deploy-jobs'), 'jobs.json');
    writeFileSync(file, configMap.data[jobsFile.slice(mount.mountPath.length + 1)]);
    const { readJobDefinitions } = await import('../src/application/job-definitions-file.js');
    const jobs = readJobDefinitions(file);
    expect(jobs.length).toBeGreaterThan(0);
    // The jobs' models are ones the fleet serves.
    const fleet = JSON.parse(documents.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'spool-config').data['fleet.json']) as { models: Record<string, unknown> };
    for (const job of jobs) expect(Object.keys(fleet.models)).toContain(job.model);
  });
});

describe('deploy/prometheus/spool-rules.yaml', () => {
  const rules = (parse(read('deploy/prometheus/spool-rules.yaml')) as { groups: Array<{ rules: Array<{ alert: string; expr: string; for?: string; labels: Record<string, string>; annotations: Record<string, string> }> }> }).groups.flatMap((group) => group.rules);

  it('alerts only on series a running Spool serves, each with a severity, a summary and a description', async () => {
    const { startTestService } = await import('./support/service.js');
    const service = await startTestService();
    let metrics: string;
    try {
      metrics = await (await fetch(`${service.url}/metrics`)).text();
    } finally {
      await service.close();
    }
    const served = new Set([...metrics.matchAll(/^# TYPE (\S+) (\S+)$/gm)].flatMap(([, name, type]) => (type === 'histogram' ? [`${name}_count`, `${name}_sum`, `${name}_bucket`] : [name!])));
    expect(rules.length).toBeGreaterThan(5);
    for (const rule of rules) {
      const series = [...rule.expr.matchAll(/\b(spool_[a-z0-9_]+)/g)].map(([name]) => name!);
      for (const name of series) expect(served, `${rule.alert}: ${name}`).toContain(name);
      expect(['critical', 'warning'], rule.alert).toContain(rule.labels.severity);
      expect(rule.annotations.summary, rule.alert).toBeTruthy();
      expect(rule.annotations.description, rule.alert).toBeTruthy();
    }
  }, 60_000);
});
