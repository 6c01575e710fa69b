// Hosts for a test on one machine: each a network namespace with an address of its own, joined by
// a veth pair to a bridge in the test's own namespace, which carries the bridge's address (the
// gateway: the host the test's servers listen on). A host can be cut off from the network (its
// link to the bridge taken down: packets to and from it are lost, connections stall as they would
// behind a failed switch port) and joined again. Needs root and `ip netns`.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Why hosts cannot be made here (undefined when they can): not root, no `ip`, namespaces refused. */
export function networkHostsUnavailable(): string | undefined {
  if (process.platform !== 'linux') return `network namespaces are Linux's; this is ${process.platform}`;
  if (process.getuid?.() !== 0) return 'making network namespaces needs root';
  const probe = `spool-probe-${process.pid}`;
  try {
    ip('netns', 'add', probe);
    ip('netns', 'del', probe);
    return undefined;
  } catch (error) {
    return `\`ip netns add\` was refused: ${(error as { stderr?: string }).stderr?.trim() || (error as Error).message}`;
  }
}

export class NetworkHosts {
  /** The bridge's address: the test's own host, as the others reach it. */
  readonly gateway: string;
  private readonly hosts = new Map<string, { namespace: string; link: string; address: string }>();
  private readonly bridge: string;
  private readonly subnet: string;

  private constructor(private readonly id: string) {
    this.bridge = `spb${id}`;
    this.subnet = freeSubnet();
    this.gateway = `${this.subnet}.1`;
  }

  /** A bridge with its address, and a host for each name, each with the next address. */
  static create(names: readonly string[]): NetworkHosts {
    const network = new NetworkHosts(randomBytes(3).toString('hex'));
    try {
      ip('link', 'add', network.bridge, 'type', 'bridge');
      ip('addr', 'add', `${network.gateway}/24`, 'dev', network.bridge);
      ip('link', 'set', network.bridge, 'up');
      names.forEach((name, index) => network.add(name, index));
    } catch (error) {
      network.remove();
      throw error;
    }
    return network;
  }

  private add(name: string, index: number): void {
    const namespace = `spool-${this.id}-${name}`;
    const link = `spv${this.id}${index}`;
    const inside = `spn${this.id}${index}`;
    const address = `${this.subnet}.${index + 2}`;
    this.hosts.set(name, { namespace, link, address });
    ip('netns', 'add', namespace);
    ip('link', 'add', link, 'type', 'veth', 'peer', 'name', inside);
    ip('link', 'set', inside, 'netns', namespace);
    ip('link', 'set', link, 'master', this.bridge, 'up');
    const within = (...args: string[]) => ip('netns', 'exec', namespace, 'ip', ...args);
    within('link', 'set', 'lo', 'up');
    within('link', 'set', inside, 'name', 'eth0');
    within('addr', 'add', `${address}/24`, 'dev', 'eth0');
    within('link', 'set', 'eth0', 'up');
    within('route', 'add', 'default', 'via', this.gateway);
  }

  private host(name: string) {
    const host = this.hosts.get(name);
    if (!host) throw new Error(`no host named ${name}`);
    return host;
  }

  /** The host's address. */
  address(name: string): string {
    return this.host(name).address;
  }

  /** The command a process runs under to run on the host (it execs the process: signals reach it). */
  launcher(name: string): string[] {
    return ['ip', 'netns', 'exec', this.host(name).namespace];
  }

  /** Cuts the host off the network: its link to the bridge goes down. */
  cut(name: string): void {
    ip('link', 'set', this.host(name).link, 'down');
  }

  /** Joins it again. */
  rejoin(name: string): void {
    ip('link', 'set', this.host(name).link, 'up');
  }

  /** Removes the hosts (their links go with them) and the bridge; what was already gone is skipped. */
  remove(): void {
    for (const { namespace, link } of this.hosts.values()) {
      // The pair goes with either end; the namespace's own end would outlive `netns del` while a
      // process still holds the namespace, and the kernel frees a namespace later still.
      for (const args of [['link', 'del', link], ['netns', 'del', namespace]]) {
        try {
          ip(...args);
        } catch {
          // Never made, or removed already.
        }
      }
    }
    try {
      ip('link', 'del', this.bridge);
    } catch {
      // Never made, or removed already.
    }
  }
}

/** A 10.x.y.0/24 no route of this machine's covers. */
function freeSubnet(): string {
  const routes = ip('-4', 'route', 'show', 'table', 'all');
  for (let attempt = 0; attempt < 100; attempt++) {
    const subnet = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
    if (!routes.includes(`${subnet}.`)) return subnet;
  }
  throw new Error('no free 10.x.y.0/24 subnet for the test hosts');
}
