#!/usr/bin/env node
import { ConfigError, loadConfig } from './config.js';
import { startService } from './service.js';

const USAGE = `usage: spool <command>

commands:
  serve    run the whole service (HTTP API, projections, processors) on the configured adapters

Configuration comes from the environment; see README.md.`;

async function serve(): Promise<void> {
  const config = loadConfig();
  const service = await startService({ config });
  service.app.log.info({ url: service.url }, 'spool is serving');
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    service.app.log.info({ signal }, 'stopping');
    service.close().then(
      () => process.exit(0),
      (error: unknown) => {
        service.app.log.error({ err: error }, 'stopping failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

async function main(argv: string[]): Promise<void> {
  const [command = 'serve'] = argv;
  switch (command) {
    case 'serve':
      return serve();
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`);
      return;
    default:
      process.stderr.write(`spool: unknown command ${JSON.stringify(command)}\n\n${USAGE}\n`);
      process.exitCode = 2;
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`spool: ${error.message}\n`);
    process.exit(78); // EX_CONFIG
  }
  process.stderr.write(`spool: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
