import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, type KafkaConfig, logLevel } from 'kafkajs';
import { quietKafkajsNegativeTimeouts } from '../../src/message-log/kafkajs-timer-warning.js';
import { packageRoot } from '../../src/platform/package-root.js';
import type { TestCertificates } from './certificates.js';
import { restartablePort } from './processes.js';

/** A single-node Apache Kafka broker (KRaft, broker and controller in one JVM) on 127.0.0.1, or the address `host` names. */
export interface KafkaBroker {
  /** host:port of the PLAINTEXT listener, for kafkajs `brokers`. */
  readonly brokers: string;
  /** With `secure`: host:port of the SASL_SSL listener (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512). */
  readonly saslSslBrokers?: string;
  /** With `secure`: host:port of the SSL listener that requires a client certificate signed by the CA. */
  readonly mutualTlsBrokers?: string;
  /** Holds the configuration, the log directories and the broker log. */
  readonly dir: string;
  /** The broker's own log (stdout and stderr of the JVM). */
  readonly logFile: string;
  /** SIGTERM, then waits for the JVM to exit (a clean shutdown). */
  stop(): Promise<void>;
  /** SIGKILL, then waits for the JVM to exit (a crash). */
  kill(): Promise<void>;
  /** Starts the stopped broker again on the same ports and directory, keeping its data. */
  start(): Promise<void>;
}

export interface KafkaBrokerOptions {
  /** Directory for configuration, data and log; by default a temporary one, removed when the process exits. */
  dir?: string;
  /** Port of the PLAINTEXT listener; a free one by default. */
  port?: number;
  /** Broker log file; `<dir>/broker.log` by default. */
  logTo?: string;
  /** How long to wait for the broker to answer; 90 s by default. */
  readyTimeoutMs?: number;
  /** The address its clients reach it on (listened on and advertised); 127.0.0.1 by default. */
  host?: string;
  /**
   * Two more listeners, as a managed Kafka has: SASL_SSL (users for PLAIN and for both SCRAM
   * mechanisms) and SSL with client certificates required, both on the server certificate of
   * `certificates`. The PLAINTEXT listener stays (the broker talks to itself over it).
   */
  secure?: { certificates: TestCertificates; users: Record<string, string> };
}

// Shared by the test setup and the benchmarks; paths from the package root, so that it works from
// the TypeScript sources and from dist/ alike.
const repoRoot = packageRoot;
const pomFile = join(packageRoot, 'bench', 'kafka', 'pom.xml');

/** The Kafka release bench/kafka/pom.xml resolves. */
export const KAFKA_VERSION = /<kafka\.version>([^<]+)<\/kafka\.version>/.exec(readFileSync(pomFile, 'utf8'))?.[1] ?? '';

const COMPLETE_MARKER = '.complete';

/**
 * The broker's jars, from Maven Central through Maven, cached in .cache/kafka/<version>/libs.
 * Maven runs only while that folder is missing or incomplete.
 */
export async function ensureKafkaJars(): Promise<string> {
  if (!KAFKA_VERSION) throw new Error(`no <kafka.version> in ${pomFile}`);
  const versionDir = join(repoRoot, '.cache', 'kafka', KAFKA_VERSION);
  const libs = join(versionDir, 'libs');
  if (existsSync(join(libs, COMPLETE_MARKER))) return libs;
  mkdirSync(versionDir, { recursive: true });
  // Copy into a private folder and rename it into place, so a concurrent or interrupted run never sees half a folder.
  const staging = mkdtempSync(join(versionDir, 'libs-'));
  try {
    const { code, output } = await run('mvn', ['-B', '-q', '-f', pomFile, 'dependency:copy-dependencies', `-DoutputDirectory=${staging}`]);
    if (code !== 0) throw new Error(`mvn could not fetch the Kafka ${KAFKA_VERSION} jars (exit ${code}):\n${output.slice(-4000)}`);
    writeFileSync(join(staging, COMPLETE_MARKER), `${new Date().toISOString()}\n`);
    if (existsSync(join(libs, COMPLETE_MARKER))) return libs;
    rmSync(libs, { recursive: true, force: true });
    renameSync(staging, libs);
  } catch (error) {
    if (existsSync(join(libs, COMPLETE_MARKER))) return libs;
    throw error;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return libs;
}

export async function startKafkaBroker(options: KafkaBrokerOptions = {}): Promise<KafkaBroker> {
  const libs = await ensureKafkaJars();
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'spool-kafka-'));
  mkdirSync(dir, { recursive: true });
  const watch = startWatchdog(options.dir ? undefined : dir);
  const logFile = options.logTo ?? join(dir, 'broker.log');
  const readyTimeoutMs = options.readyTimeoutMs ?? 90_000;
  // Ports below the ephemeral range: the broker is stopped and started again on them (restart()).
  const port = options.port ?? (await restartablePort());
  let controllerPort = await restartablePort();
  while (controllerPort === port) controllerPort = await restartablePort();
  const host = options.host ?? '127.0.0.1';
  const brokers = `${host}:${port}`;
  const securePorts = options.secure ? { saslSsl: await restartablePort(), mutualTls: await restartablePort() } : undefined;
  const config = join(dir, 'server.properties');
  writeFileSync(config, serverProperties({ host, port, controllerPort, logDirs: join(dir, 'data'), ...(options.secure && securePorts ? { secure: { ...options.secure, ports: securePorts } } : {}) }));
  const log4j = join(dir, 'log4j.properties');
  writeFileSync(log4j, LOG4J_PROPERTIES);
  const java = (mainClass: string, args: string[]) => [
    ...JVM_OPTIONS,
    `-Dlog4j.configuration=file:${log4j}`,
    `-Dkafka.logs.dir=${dir}`,
    '-cp',
    `${libs}/*`,
    mainClass,
    ...args,
  ];

  if (!existsSync(join(dir, 'data', 'meta.properties'))) {
    // SCRAM users live in the cluster's metadata, written when the storage is formatted.
    const scram = Object.entries(options.secure?.users ?? {}).flatMap(([name, password]) =>
      ['SCRAM-SHA-256', 'SCRAM-SHA-512'].flatMap((mechanism) => ['--add-scram', `${mechanism}=[name=${name},password=${password}]`]),
    );
    const { code, output } = await run('java', java('kafka.tools.StorageTool', ['format', '--ignore-formatted', '-t', clusterId(), '-c', config, ...scram]));
    if (code !== 0) throw new Error(`kafka-storage format failed (exit ${code}):\n${output.slice(-4000)}`);
  }

  let jvm: RunningJvm | undefined;

  const start = async (): Promise<void> => {
    if (jvm && jvm.exitCode === null) throw new Error(`the Kafka broker on ${brokers} is already running`);
    const started = launch(java('kafka.Kafka', [config]), logFile, watch);
    jvm = started;
    try {
      await waitUntilAnswering(brokers, started, readyTimeoutMs);
    } catch (error) {
      await started.signal('SIGKILL');
      throw new Error(`${(error as Error).message}\n--- ${logFile} (tail) ---\n${tail(logFile, 60)}`);
    }
  };

  await start();
  return {
    brokers,
    ...(securePorts ? { saslSslBrokers: `${host}:${securePorts.saslSsl}`, mutualTlsBrokers: `${host}:${securePorts.mutualTls}` } : {}),
    dir,
    logFile,
    start,
    stop: async () => {
      // A clean shutdown takes a few seconds; one that hangs is not worth waiting for.
      await jvm?.signal('SIGTERM', 60_000);
    },
    kill: async () => {
      await jvm?.signal('SIGKILL');
    },
  };
}

// Small heap, serial GC and the C1 compiler only: a broker that starts fast on two shared cores.
const JVM_OPTIONS = [
  '-Xms128m',
  '-Xmx384m',
  '-XX:+UseSerialGC',
  '-XX:TieredStopAtLevel=1',
  '-XX:-UsePerfData',
  '-Xss512k',
  '-Djava.awt.headless=true',
  '-Djava.net.preferIPv4Stack=true',
];

const LOG4J_PROPERTIES = `log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
log4j.logger.state.change.logger=WARN
`;

function serverProperties(p: {
  host: string;
  port: number;
  controllerPort: number;
  logDirs: string;
  secure?: { certificates: TestCertificates; users: Record<string, string>; ports: { saslSsl: number; mutualTls: number } };
}): string {
  const secure = p.secure;
  const jaasUsers = Object.entries(secure?.users ?? {})
    .map(([name, password]) => `user_${name}="${password}"`)
    .join(' ');
  const secureProperties: Record<string, string> = secure
    ? {
        'sasl.enabled.mechanisms': 'PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
        'listener.name.sasl_ssl.plain.sasl.jaas.config': `org.apache.kafka.common.security.plain.PlainLoginModule required ${jaasUsers};`,
        'listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config': 'org.apache.kafka.common.security.scram.ScramLoginModule required;',
        'listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config': 'org.apache.kafka.common.security.scram.ScramLoginModule required;',
        'ssl.keystore.type': 'PKCS12',
        'ssl.keystore.location': secure.certificates.serverKeystoreFile,
        'ssl.keystore.password': secure.certificates.keystorePassword,
        'ssl.key.password': secure.certificates.keystorePassword,
        'listener.name.ssl.ssl.client.auth': 'required',
        'listener.name.ssl.ssl.truststore.type': 'PEM',
        'listener.name.ssl.ssl.truststore.location': secure.certificates.caFile,
      }
    : {};
  const secureListeners = secure ? `,SASL_SSL://${p.host}:${secure.ports.saslSsl},SSL://${p.host}:${secure.ports.mutualTls}` : '';
  return `${Object.entries({
    'process.roles': 'broker,controller',
    'node.id': '1',
    'controller.quorum.voters': `1@127.0.0.1:${p.controllerPort}`,
    listeners: `PLAINTEXT://${p.host}:${p.port},CONTROLLER://127.0.0.1:${p.controllerPort}${secureListeners}`,
    'advertised.listeners': `PLAINTEXT://${p.host}:${p.port}${secureListeners}`,
    'controller.listener.names': 'CONTROLLER',
    'inter.broker.listener.name': 'PLAINTEXT',
    'listener.security.protocol.map': `PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT${secure ? ',SASL_SSL:SASL_SSL,SSL:SSL' : ''}`,
    ...secureProperties,
    'log.dirs': p.logDirs,
    'num.partitions': '1',
    'default.replication.factor': '1',
    'min.insync.replicas': '1',
    // One partition each: creating the default 50 slows the first consumer group down for nothing.
    'offsets.topic.num.partitions': '1',
    'offsets.topic.replication.factor': '1',
    'transaction.state.log.num.partitions': '1',
    'transaction.state.log.replication.factor': '1',
    'transaction.state.log.min.isr': '1',
    'group.initial.rebalance.delay.ms': '0',
    // A killed broker's registration blocks its restart until its session expires (9 s by default).
    'broker.heartbeat.interval.ms': '500',
    'broker.session.timeout.ms': '3000',
    'auto.create.topics.enable': 'true',
    'num.network.threads': '2',
    'num.io.threads': '2',
    'num.recovery.threads.per.data.dir': '1',
    'background.threads': '2',
    // The cleaner's default 128 MiB buffer would take a third of the heap.
    'log.cleaner.dedupe.buffer.size': String(8 * 1024 * 1024),
  })
    .map(([key, value]) => `${key}=${value}`)
    .join('\n')}\n`;
}

interface RunningJvm {
  readonly exitCode: number | null;
  readonly exited: Promise<void>;
  /** Sends the signal, waits for the exit; SIGKILL after `killAfterMs`. */
  signal(signal: NodeJS.Signals, killAfterMs?: number): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const jvm of running) jvm.kill('SIGKILL');
});

// Acts once this process is gone, however it ended (vitest workers and killed processes see no exit hook):
// kills the JVM last named on its stdin, then removes the temporary directory given as $1.
// It runs in a session of its own, so a Ctrl-C to the test run spares it.
const WATCHDOG_SCRIPT = `pid=
while read -r line; do pid=$line; done
if [ -n "$pid" ]; then
  kill -9 "$pid" 2>/dev/null
  n=0; while kill -0 "$pid" 2>/dev/null && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
fi
if [ -n "$1" ]; then rm -rf "$1"; fi`;

/** Returns how to tell the watchdog the pid of the running JVM (undefined: none). */
function startWatchdog(temporaryDir: string | undefined): (pid: number | undefined) => void {
  const watchdog = spawn('sh', ['-c', WATCHDOG_SCRIPT, 'kafka-broker-watchdog', temporaryDir ?? ''], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  watchdog.on('error', () => {});
  watchdog.stdin.on('error', () => {});
  watchdog.unref();
  return (pid) => watchdog.stdin.write(`${pid ?? ''}\n`);
}

function launch(args: string[], logFile: string, watch: (pid: number | undefined) => void): RunningJvm {
  const out = openSync(logFile, 'a');
  const child = spawn('java', args, { stdio: ['ignore', out, out] });
  closeSync(out);
  running.add(child);
  watch(child.pid);
  let exitCode: number | null = null;
  const exited = new Promise<void>((resolve) => {
    const done = (code: number | null) => {
      exitCode = code ?? -1;
      running.delete(child);
      watch(undefined);
      resolve();
    };
    child.once('exit', done);
    child.once('error', () => done(-1));
  });
  return {
    get exitCode() {
      return exitCode;
    },
    exited,
    async signal(signal, killAfterMs) {
      if (exitCode !== null) return;
      child.kill(signal);
      const timer = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * A kafkajs client for a test's own use (an admin, a probe): with kafkajs's negative-timeout
 * warning dropped, as the service's Kafka message log drops it, so a test's output shows only what
 * matters.
 */
export function kafkaClient(config: KafkaConfig): Kafka {
  quietKafkajsNegativeTimeouts();
  return new Kafka(config);
}

async function waitUntilAnswering(brokers: string, jvm: RunningJvm, timeoutMs: number): Promise<void> {
  const kafka = kafkaClient({ clientId: 'spool-test-broker-probe', brokers: [brokers], logLevel: logLevel.NOTHING, connectionTimeout: 1_000, requestTimeout: 5_000, retry: { retries: 0 } });
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    if (jvm.exitCode !== null) throw new Error(`the Kafka broker exited (code ${jvm.exitCode}) before it answered on ${brokers}`);
    const admin = kafka.admin();
    try {
      await admin.connect();
      await admin.describeCluster();
      await admin.listTopics();
      return;
    } catch (error) {
      lastError = error;
    } finally {
      await admin.disconnect().catch(() => {});
    }
    if (Date.now() > deadline) throw new Error(`the Kafka broker did not answer on ${brokers} within ${timeoutMs} ms: ${String(lastError)}`);
    await Promise.race([jvm.exited, new Promise((resolve) => setTimeout(resolve, 200))]);
  }
}

/** Kafka's Uuid text form: 16 random bytes, base64url, never starting with '-'. */
function clusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

function run(command: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', (error) => resolve({ code: -1, output: `${output}${String(error)}` }));
    child.once('close', (code) => resolve({ code: code ?? -1, output }));
  });
}

function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
