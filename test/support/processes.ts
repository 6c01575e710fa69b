// Starting and stopping Spool and other node processes: used by the tests and the benchmarks.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { packageRoot } from '../../src/platform/package-root.js';

/**
 * Every child started here that is still running when this process exits (a test that timed out
 * before it could stop one) is killed then, rather than left running on the machine.
 */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** Starts a node script and resolves once a line of its output matches; returns the match too. */
export function startNode(
  script: string,
  args: readonly string[],
  env: Record<string, string>,
  ready: RegExp,
  /** Options for node itself, e.g. --cpu-prof. */
  nodeArgs: string[] = [],
  /** A command node runs under, e.g. `ip netns exec NAME` for another network namespace (it must exec node, so signals reach it). */
  launcher: string[] = [],
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  return new Promise((resolve, reject) => {
    const [command, ...before] = [...launcher, process.execPath];
    const child = spawn(command!, [...before, ...nodeArgs, script, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    child.once('exit', () => children.delete(child));
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = ready.exec(output);
      if (match) {
        child.stdout?.off('data', onData);
        child.stderr?.off('data', onData);
        child.stdout?.resume();
        child.stderr?.resume();
        resolve({ child, match });
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code} before it was ready:\n${output}`)));
  });
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/**
 * Starts the built `spool` CLI (`dist/src/process/cli.js ARGS`) and resolves once it logs the URL it
 * serves on (`PORT=0` picks a free port), without waiting for /ready.
 */
export async function startSpoolCli(
  args: readonly string[],
  env: Record<string, string>,
  nodeArgs: string[] = [],
  launcher: string[] = [],
): Promise<{ child: ChildProcess; url: string }> {
  const { child, match } = await startNode(join(packageRoot, 'dist/src/process/cli.js'), args, env, /"url":"(http:\/\/[^"]+)"/, nodeArgs, launcher);
  return { child, url: match[1]! };
}

/** Resolves once a Spool process answers /ready with 200. */
export async function waitForReady(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ready = await fetch(`${url}/ready`).catch(() => undefined);
    await ready?.arrayBuffer();
    if (ready?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${url} was not ready within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A loopback port nothing listens on now (bound, then released): for a dead address, or one to hand a process. */
export async function unusedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== 'object' || !address) throw new Error('the loopback interface gave no port');
  return address.port;
}

/**
 * A loopback port for a server the test stops and starts again on the same port (a Kafka broker,
 * PostgreSQL): one below the kernel's range of ephemeral ports, free now. A port the kernel hands
 * out (listen on 0) lies in that range, and while its server is down any outgoing connection of
 * the test run may take it as its source port: the restart then fails with "address in use".
 */
export async function restartablePort(): Promise<number> {
  let low = 32768;
  try {
    low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || low;
  } catch {
    // Not Linux: its default range starts higher still.
  }
  const from = Math.max(1024, Math.min(20_000, low - 2_000));
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = from + Math.floor(Math.random() * Math.max(1, low - from));
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error('no free port below the ephemeral range');
}
