// Ids derived from names: the same work always yields the same id, whichever process does it.
import { createHash, hash } from 'node:crypto';

/**
 * A UUID derived from a name (RFC 4122 layout, version 5 bits, sha256-based): the same work
 * always yields the same event id, so redelivered work appends nothing twice.
 */
export function deterministicUuid(name: string): string {
  const bytes = createHash('sha256').update(name).digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * UUIDs (version 8, RFC 9562) that sort by (lead, name, number). Of their 122 free bits the last
 * `numberDigits` hex digits are the number (12 by default: 48 bits); `lead`, where given, is the
 * first up to 11 (hex digits that order the names among themselves: a time, say); a sha256 of the
 * name fills the rest. Ids of one name are neighbours in any index keyed by id, in number order;
 * ids from a hash alone scatter each insert onto its own page. The maker for one name: the hash
 * is worked out once, not per number (a batch's lines are recorded together, and a sha256 per
 * line costs more than the rest of its id). Two names with the same lead differ by the hash's
 * bits alone: 74 less the lead's and the number's beyond 48.
 */
export function orderedUuids(name: string, options: { readonly lead?: string; readonly numberDigits?: number } = {}): (number: number) => string {
  const lead = options.lead ?? '';
  const numberDigits = options.numberDigits ?? 12;
  if (!/^[0-9a-f]{0,11}$/.test(lead)) throw new RangeError(`an ordered UUID's lead is up to 11 hex digits, not ${lead}`);
  if (!Number.isInteger(numberDigits) || numberDigits < 8 || numberDigits > 12) throw new RangeError(`an ordered UUID's number takes 8 to 12 hex digits, not ${numberDigits}`);
  const hex = lead + hash('sha256', name, 'hex').slice(lead.length);
  const variant = ((parseInt(hex[15]!, 16) & 0x3) | 0x8).toString(16);
  const prefix = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(12, 15)}-${variant}${hex.slice(16, 19)}-${hex.slice(19, 31 - numberDigits)}`;
  const largest = 16 ** numberDigits - 1;
  return (number) => {
    if (!Number.isInteger(number) || number < 0 || number > largest) throw new RangeError(`an ordered UUID takes a number from 0 to 16^${numberDigits} - 1, not ${number}`);
    return `${prefix}${number.toString(16).padStart(numberDigits, '0')}`;
  };
}

/** A stable id derived from a name, with its kind's prefix (id-prefixes.ts): a batch's output file, a line, a webhook event. */
export function derivedId(prefix: string, name: string): string {
  // The one-shot hash: every output line has one of these, and a Hash object each cost 3× as much.
  return `${prefix}${hash('sha256', name, 'hex').slice(0, 24)}`;
}
