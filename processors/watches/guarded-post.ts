import { type LookupAddress, type LookupOptions, lookup as dnsLookup } from 'node:dns';
import { request as httpsRequest } from 'node:https';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';

// node:http through require: its ESM namespace reads every export, and one of them loads Node's
// bundled undici, which this process otherwise never needs (test/bundled-undici.test.ts).
const { request: httpRequest }: typeof import('node:http') = createRequire(import.meta.url)('node:http');
import type { OutboundTargets } from '../../src/platform/outbound-targets.js';

/** A delivery refused before any byte was sent: its target is (or resolves to) an address not to be reached. */
export class TargetRefusedError extends Error {
  override readonly name = 'TargetRefusedError';
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * POSTs `body` to an account's webhook URL and resolves with the status code, checking the address
 * actually connected to: the host name is resolved at this very connection (every address it
 * gives must be allowed, so a name that resolved outward when the webhook was registered and
 * inward now is caught), an address written in the URL is checked before connecting, and no
 * redirect is followed (node:http follows none).
 */
export function guardedPost(url: string, headers: Record<string, string>, body: string, timeoutMs: number, targets: OutboundTargets): Promise<number> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const host = target.hostname.replace(/^\[|\]$/g, '');
    const allowedByName = targets.allowsHost(host);
    if (isIP(host) !== 0 && !allowedByName) {
      const refused = targets.refusal(host);
      if (refused) return reject(new TargetRefusedError(refused));
    }
    const lookup = (hostname: string, options: LookupOptions, callback: LookupCallback) => {
      dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
        if (error) return callback(error, []);
        const refused = allowedByName ? undefined : addresses.map((address) => targets.refusal(address.address)).find(Boolean);
        if (refused) return callback(new TargetRefusedError(`${hostname} resolves to ${refused}`), []);
        if (options.all) return callback(null, addresses);
        callback(null, addresses[0]!.address, addresses[0]!.family);
      });
    };
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const request = send(target, { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, lookup: lookup as never, agent: false, timeout: timeoutMs });
    request.once('timeout', () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    request.once('error', reject);
    request.once('response', (response) => {
      response.resume();
      response.once('end', () => resolve(response.statusCode ?? 0));
      response.once('error', () => resolve(response.statusCode ?? 0));
    });
    request.end(body);
  });
}
