// Every id minted (at random, or the time first and random after), in one place; ids derived from
// names are src/domain/derived-ids.ts.
import { randomBytes, randomUUID } from 'node:crypto';
import { ID_PREFIX } from '../domain/id-prefixes.js';

/** 24 hex digits (96 random bits): unguessable, and safe in a blob key, a stream name and a URL. */
const randomHex = (): string => randomBytes(12).toString('hex');

/**
 * 24 hex digits that sort by when they were minted: the time in milliseconds (11 digits, enough
 * until the year 2527), then 52 random bits (two ids of one millisecond are the same once in 2^52
 * pairs: a millisecond would need some 2^26 of them for one likely). For the ids minted many
 * times a second, whose names key the log's streams and the read models' rows: every index keyed
 * by them takes a new id at its right edge, and the ids of batches that move together (created
 * in the same seconds) share index pages. Ids from random digits alone put each batch's rows on
 * pages of their own, spread over the whole of each index, so a commit wrote more pages the
 * longer a service had run (bench/FINDINGS.md).
 */
const timeOrderedHex = (): string => Date.now().toString(16).padStart(11, '0') + randomBytes(7).toString('hex').slice(0, 13);

/** A random UUID's 32 hex digits, the way OpenAI's ids carry them. */
const uuidHex = (): string => randomUUID().replace(/-/g, '');

export const newFileId = (): string => `${ID_PREFIX.file}${timeOrderedHex()}`;
export const newBatchId = (): string => `${ID_PREFIX.batch}${timeOrderedHex()}`;
export const newWebhookId = (): string => `${ID_PREFIX.webhook}${randomHex()}`;
export const newWeightSyncId = (): string => `${ID_PREFIX.weightSync}${randomHex()}`;
export const newAccountKeyId = (): string => `${ID_PREFIX.accountKey}${randomHex()}`;
/**
 * An account's key: its key id's digits, a dot, and 256 random bits; shown once and kept only as
 * its SHA-256. The id in it finds the key's record, whose digest is then compared in constant time.
 */
export const newAccountKey = (keyId: string): string => `${ID_PREFIX.accountSecret}${keyId.slice(ID_PREFIX.accountKey.length)}.${randomBytes(32).toString('base64url')}`;

/**
 * An event's id where the work that records it has no name to derive one from: a UUID of version
 * 7 (RFC 9562), the time in milliseconds first, so that the log's index of event ids (and the
 * history's) takes each new one at its right edge. A random UUID with its first 48 bits and its
 * version replaced: 74 random bits stay.
 */
export const newEventId = (): string => {
  const random = randomUUID();
  const time = Date.now().toString(16).padStart(12, '0');
  return `${time.slice(0, 8)}-${time.slice(8)}-7${random.slice(15)}`;
};

/** An HTTP request's id (x-request-id) where the caller gave none to keep. */
export const newRequestId = (): string => randomUUID();

/** An engine request's id where the engine gave none. */
export const newEngineRequestId = (): string => `${ID_PREFIX.engineRequest}${uuidHex()}`;

/** A chat completion's id, or a (text) completion's. */
export const newCompletionId = (chat: boolean): string => `${chat ? ID_PREFIX.chatCompletion : ID_PREFIX.completion}${uuidHex()}`;

/** A Responses API answer's id, and the id of the message it holds. */
export const newResponseId = (): string => `${ID_PREFIX.response}${uuidHex()}`;
export const newResponseMessageId = (): string => `${ID_PREFIX.responseMessage}${uuidHex()}`;
