import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

/**
 * Which addresses an account's webhook may reach. A service that posts to URLs its clients choose
 * must not become their way into the operator's network: loopback (Spool's own ports among them),
 * link-local (cloud metadata at 169.254.169.254), private, shared-address, multicast and reserved
 * ranges are refused, and so is every address of this machine (a public address Spool listens on
 * too), IPv4-mapped IPv6 judged as the IPv4 address it carries, unless the operator allows them
 * (WEBHOOK_ALLOWED_TARGETS: host names and CIDR ranges, comma-separated).
 */
export class OutboundTargets {
  private readonly inward = new BlockList();
  private readonly allowedRanges = new BlockList();
  private readonly allowedHosts = new Set<string>();

  constructor(allowed: readonly string[] = [], ownAddresses: readonly string[] = machineAddresses()) {
    for (const [network, prefix] of INWARD_V4) this.inward.addSubnet(network, prefix, 'ipv4');
    for (const [network, prefix] of INWARD_V6) this.inward.addSubnet(network, prefix, 'ipv6');
    for (const address of ownAddresses) {
      const family = isIP(address);
      if (family !== 0) this.inward.addAddress(address, family === 4 ? 'ipv4' : 'ipv6');
    }
    for (const entry of allowed) {
      const range = parseRange(entry);
      if (range) this.allowedRanges.addSubnet(range.network, range.prefix, range.family);
      else this.allowedHosts.add(entry.toLowerCase());
    }
  }

  /** Whether `host` (as written in the URL) is allowed by name, whatever it resolves to. */
  allowsHost(host: string): boolean {
    return this.allowedHosts.has(bare(host).toLowerCase());
  }

  /** Why an address may not be connected to; undefined when it may. */
  refusal(address: string): string | undefined {
    const ip = bare(address);
    const family = isIP(ip);
    if (family === 0) return `${address} is not an IP address`;
    const mapped = family === 6 ? /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1] : undefined;
    const [checked, kind] = mapped ? [mapped, 'ipv4' as const] : [ip, family === 4 ? ('ipv4' as const) : ('ipv6' as const)];
    if (this.allowedRanges.check(checked, kind)) return undefined;
    if (this.inward.check(checked, kind)) return `${address} is a loopback, link-local, private or reserved address, or one of this machine's (WEBHOOK_ALLOWED_TARGETS may allow it)`;
    return undefined;
  }
}

/**
 * Why a URL's host may not be a webhook target, resolving a name now (every address it gives must
 * be allowed); undefined when it may, or when the name does not resolve (the delivery resolves it
 * again and is refused then if it must be).
 */
export async function resolvedTargetRefusal(url: string, targets: OutboundTargets): Promise<string | undefined> {
  let host: string;
  try {
    host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return undefined; // the URL's own problem is the registration's to name
  }
  if (targets.allowsHost(host)) return undefined;
  if (isIP(host) !== 0) return targets.refusal(host);
  const addresses = await lookup(host, { all: true }).catch(() => []);
  const refused = addresses.map((address) => targets.refusal(address.address)).find(Boolean);
  return refused ? `${host} resolves to ${refused}` : undefined;
}

/** A WEBHOOK_ALLOWED_TARGETS entry's problem, or undefined when it is a host name or a CIDR range. */
export function allowedTargetProblem(entry: string): string | undefined {
  if (entry.includes('/')) return parseRange(entry) ? undefined : `${JSON.stringify(entry)} is not a CIDR range (address/prefix)`;
  return /^[A-Za-z0-9.-]{1,253}$/.test(entry) || isIP(bare(entry)) !== 0 ? undefined : `${JSON.stringify(entry)} is neither a host name nor an address`;
}

const bare = (host: string) => host.replace(/^\[|\]$/g, '');

/** Every address of this machine's interfaces (without an IPv6 zone). */
function machineAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .map((entry) => entry?.address.replace(/%.*$/, ''))
    .filter((address): address is string => address !== undefined);
}

function parseRange(entry: string): { network: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const match = /^([^/]+)\/(\d{1,3})$/.exec(entry.trim());
  if (!match) {
    const family = isIP(bare(entry));
    return family === 0 ? undefined : { network: bare(entry), prefix: family === 4 ? 32 : 128, family: family === 4 ? 'ipv4' : 'ipv6' };
  }
  const family = isIP(match[1]!);
  const prefix = Number(match[2]);
  if (family === 0 || prefix > (family === 4 ? 32 : 128)) return undefined;
  return { network: match[1]!, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
}

const INWARD_V4: ReadonlyArray<readonly [string, number]> = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];

const INWARD_V6: ReadonlyArray<readonly [string, number]> = [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b:1::', 48],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
];
