// Every id minted at random, in one place; ids derived from names are src/domain/derived-ids.ts.
import { randomBytes, randomUUID } from 'node:crypto';
import { ID_PREFIX } from '../domain/id-prefixes.js';

/** 24 hex digits (96 random bits): unguessable, and safe in a blob key, a stream name and a URL. */
const randomHex = (): string => randomBytes(12).toString('hex');

/** A random UUID's 32 hex digits, the way OpenAI's ids carry them. */
const uuidHex = (): string => randomUUID().replace(/-/g, '');

export const newFileId = (): string => `${ID_PREFIX.file}${randomHex()}`;
export const newBatchId = (): string => `${ID_PREFIX.batch}${randomHex()}`;
export const newWebhookId = (): string => `${ID_PREFIX.webhook}${randomHex()}`;
export const newWeightSyncId = (): string => `${ID_PREFIX.weightSync}${randomHex()}`;
export const newAccountKeyId = (): string => `${ID_PREFIX.accountKey}${randomHex()}`;
/**
 * An account's key: its key id's digits, a dot, and 256 random bits; shown once and kept only as
 * its SHA-256. The id in it finds the key's record, whose digest is then compared in constant time.
 */
export const newAccountKey = (keyId: string): string => `${ID_PREFIX.accountSecret}${keyId.slice(ID_PREFIX.accountKey.length)}.${randomBytes(32).toString('base64url')}`;

/** An event's id where the work that records it has no name to derive one from. */
export const newEventId = (): string => randomUUID();

/** An HTTP request's id (x-request-id) where the caller gave none to keep. */
export const newRequestId = (): string => randomUUID();

/** An engine request's id where the engine gave none. */
export const newEngineRequestId = (): string => `${ID_PREFIX.engineRequest}${uuidHex()}`;

/** A chat completion's id, or a (text) completion's. */
export const newCompletionId = (chat: boolean): string => `${chat ? ID_PREFIX.chatCompletion : ID_PREFIX.completion}${uuidHex()}`;

/** A Responses API answer's id, and the id of the message it holds. */
export const newResponseId = (): string => `${ID_PREFIX.response}${uuidHex()}`;
export const newResponseMessageId = (): string => `${ID_PREFIX.responseMessage}${uuidHex()}`;
