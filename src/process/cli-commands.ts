import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.js';
import { applyHeapPolicy } from './heap-policy.js';
import { DEFAULT_CHECKPOINT, createCheckpoint } from '../engine/builtin/checkpoint.js';
import { PROCESSOR_KINDS, type ProcessorKind } from '../messages/topics.js';
import { replay } from './replay-command.js';
import { ALL_ROLES, type Role, startService } from '../service.js';
import { ExitCode, StartupFailure, oneLine } from './startup-failure.js';
import { CLIENT_GROUPS, ClientUsageError, clientUsage, runClientCommand } from '../client/client-commands.js';
import { SERVICE_VERSION } from '../http/app.js';

const USAGE = `usage: spool <command>

commands:
  serve [--all]
           run the HTTP API. On the embedded message log (KAFKA_BROKERS unset) the relay and every
           processor run in the same process; on Kafka only the API does, unless --all is given
  processor validator|inference|finalizer|checkpoint
           run one processor kind (KAFKA_BROKERS must be set); run more copies to scale it
  relay    publish the event log to Kafka: work topics and the public batch-events topic
  replay [--keep DIR]
           rebuild every read model from the log into a fresh store and compare it with
           DATA_DIR/read-models.sqlite; prints a JSON report, exits 1 if they differ
  checkpoint create --out DIR [--seed N] [--layers N] [--hidden N] [--dtype f32|bf16] [--quantize int8] [--shards N]
           write a built-in model checkpoint (config.json + safetensors) generated from a seed

a client of a running Spool (--base-url or SPOOL_BASE_URL, default http://127.0.0.1:8080):
CLIENT_USAGE

  --version  the version;  spool <command> --help  a command's own help

The service's configuration comes from the environment; see README.md.`;

/** How often a stop under way says what it still waits for. */
const STOP_PROGRESS_MS = 2000;

async function run(roles: readonly Role[] | undefined): Promise<void> {
  const config = loadConfig();
  // A service runs for as long as its batches do: its old generation grows by half its live data at most.
  applyHeapPolicy();
  // A signal during the start ends the process at once: there is nothing to finish yet.
  const exitAtOnce = (signal: NodeJS.Signals) => process.exit(signal === 'SIGINT' ? ExitCode.interrupted : ExitCode.terminated);
  process.once('SIGINT', exitAtOnce);
  process.once('SIGTERM', exitAtOnce);
  const service = await startService({ config, ...(roles ? { roles } : {}) });
  const log = service.app.log;
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      // An operator who asks twice does not want to wait.
      log.warn({ signal, waiting_for: service.waitingFor() }, 'stopping at once, without waiting');
      process.exit(signal === 'SIGINT' ? ExitCode.interrupted : ExitCode.terminated);
    }
    stopping = true;
    const started = Date.now();
    const closing = service.close();
    log.info({ signal, waiting_for: service.waitingFor(), timeout_seconds: config.shutdownTimeoutSeconds }, 'stopping');
    const progress = setInterval(() => log.info({ waiting_for: service.waitingFor(), seconds: Math.round((Date.now() - started) / 1000) }, 'still stopping'), STOP_PROGRESS_MS);
    const deadline = setTimeout(() => {
      log.error({ waiting_for: service.waitingFor() }, `gave up stopping after SHUTDOWN_TIMEOUT_SECONDS=${config.shutdownTimeoutSeconds}; unfinished work is done again at the next start`);
      process.exit(ExitCode.shutdownTimedOut);
    }, config.shutdownTimeoutSeconds * 1000);
    closing.then(
      () => {
        clearInterval(progress);
        clearTimeout(deadline);
        log.info({ seconds: (Date.now() - started) / 1000 }, 'stopped');
        process.exit(ExitCode.ok);
      },
      (error: unknown) => {
        log.error({ err: error }, 'stopping failed');
        process.exit(ExitCode.unexpected);
      },
    );
  };
  // The stop handlers are in place before the start's are taken off: a signal between the two
  // would find none, and kill the process the default way, with no clean stop.
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  process.off('SIGINT', exitAtOnce);
  process.off('SIGTERM', exitAtOnce);
  // Said only now: whoever waits for this line may stop the service at once.
  log.info({ url: service.url, roles: service.roles }, 'spool is serving');
}

function serveRoles(argv: string[]): readonly Role[] | undefined {
  const { values } = parseArgs({ args: argv, options: { all: { type: 'boolean' } }, strict: true });
  return values.all ? ALL_ROLES : undefined;
}

function processorRoles(argv: string[]): readonly Role[] {
  const [kind, ...rest] = argv;
  if (!PROCESSOR_KINDS.includes(kind as ProcessorKind)) throw new UsageError(`processor needs a kind: ${PROCESSOR_KINDS.join(', ')}`);
  if (rest.length > 0) throw new UsageError(`unexpected arguments after the processor kind: ${rest.join(' ')}`);
  return [kind as ProcessorKind];
}

async function replayCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { keep: { type: 'string' } }, strict: true });
  const report = await replay(loadConfig(), values.keep ? { keepIn: values.keep } : {});
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  process.stderr.write(
    report.identical
      ? `spool replay: ${report.events} events replayed in ${report.seconds.toFixed(2)} s (${report.events_per_second}/s); the read models are identical\n`
      : `spool replay: the read models differ in ${report.differences.map((difference) => difference.table).join(', ')}\n`,
  );
  if (!report.identical) process.exitCode = 1;
}

function checkpoint(argv: string[]): void {
  const [action, ...rest] = argv;
  if (action !== 'create') throw new UsageError(`unknown checkpoint action ${JSON.stringify(action ?? '')}: expected create`);
  const { values } = parseArgs({
    args: rest,
    options: {
      out: { type: 'string' },
      seed: { type: 'string' },
      layers: { type: 'string' },
      hidden: { type: 'string' },
      dtype: { type: 'string' },
      quantize: { type: 'string' },
      shards: { type: 'string' },
    },
    strict: true,
  });
  if (!values.out) throw new UsageError('checkpoint create needs --out DIR');
  const integer = (name: string, raw: string | undefined, fallback: number, min: number, max: number) => {
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) throw new UsageError(`--${name} must be an integer from ${min} to ${max}`);
    return Number(raw);
  };
  const dtype = values.dtype ?? 'f32';
  if (dtype !== 'f32' && dtype !== 'bf16') throw new UsageError('--dtype must be f32 or bf16');
  if (values.quantize !== undefined && values.quantize !== 'int8') throw new UsageError('--quantize must be int8');
  const hidden = integer('hidden', values.hidden, DEFAULT_CHECKPOINT.hidden, 8, 8192);
  if (hidden % 16 !== 0) throw new UsageError('--hidden must be a multiple of 16');
  const config = createCheckpoint(values.out, {
    seed: integer('seed', values.seed, 0, 0, 2 ** 32 - 1),
    layers: integer('layers', values.layers, DEFAULT_CHECKPOINT.layers, 1, 256),
    hidden,
    dtype,
    ...(values.quantize === 'int8' ? { quantize: 'int8' as const } : {}),
    shards: integer('shards', values.shards, 1, 1, 10_000),
  });
  process.stdout.write(`${JSON.stringify({ out: values.out, config })}\n`);
}

class UsageError extends Error {}

const usage = () => USAGE.replace('CLIENT_USAGE', clientUsage());

async function main(argv: string[]): Promise<void> {
  const [command] = argv;
  if (command !== undefined && CLIENT_GROUPS.has(command)) {
    process.exitCode = await runClientCommand(argv);
    return;
  }
  switch (command) {
    case undefined:
      process.stderr.write(`${usage()}\n`);
      process.exitCode = ExitCode.usage;
      return;
    case '--version':
    case 'version':
      process.stdout.write(`spool ${SERVICE_VERSION}\n`);
      return;
    case 'serve':
      if (argv.includes('--help') || argv.includes('-h')) {
        process.stdout.write('usage: spool serve [--all]\n\nRun the HTTP API (with the relay and every processor on the embedded message log; on Kafka with --all). Configured from the environment: README.md.\n');
        return;
      }
      return run(serveRoles(argv.slice(1)));
    case 'processor':
      return run(processorRoles(argv.slice(1)));
    case 'relay':
      if (argv.length > 1) throw new UsageError('relay takes no arguments');
      return run(['relay']);
    case 'replay':
      return replayCommand(argv.slice(1));
    case 'checkpoint':
      return checkpoint(argv.slice(1));
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${usage()}\n`);
      return;
    default:
      process.stderr.write(`spool: unknown command ${JSON.stringify(command)}\n\n${usage()}\n`);
      process.exitCode = ExitCode.usage;
  }
}

// Every failure is one line on stderr and an exit code from README's table; a stack trace only
// for the unforeseen, and only when asked for (LOG_LEVEL=debug or trace).
main(process.argv.slice(2)).catch((error: unknown) => {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (error instanceof ClientUsageError) {
    process.stderr.write(`spool: ${error.message}\n${error.usage ? `\n${error.usage}\n` : ''}`);
    process.exit(ExitCode.usage);
  }
  if (error instanceof UsageError || (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS'))) {
    process.stderr.write(`spool: ${(error as Error).message}\n\n${usage()}\n`);
    process.exit(ExitCode.usage);
  }
  if (error instanceof ConfigError) {
    process.stderr.write(`spool: invalid configuration: ${error.problems.join('; ')}\n`);
    process.exit(ExitCode.config);
  }
  if (error instanceof StartupFailure) {
    process.stderr.write(`spool: ${error.message}\n`);
    process.exit(error.exitCode);
  }
  process.stderr.write(`spool: unexpected error: ${oneLine(error)}\n`);
  if (/^(debug|trace)$/.test(process.env.LOG_LEVEL ?? '') && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
  process.exit(ExitCode.unexpected);
});
