// How the main loop and the engine I/O thread (engine-io-thread.ts) write their messages to each
// other: the messages of one turn go over as one flat array of strings, numbers, booleans and the
// few small objects a message holds (headers, an answer's usage), each message a record of a fixed
// number of slots led by its kind. Structured cloning writes every object's property names and
// reads them back into new objects: a batch line's request and its answer, as objects, cost the
// two threads about 10 µs of CPU together, as records about 6 (a script of the same shapes,
// bench/FINDINGS.md, 2026-12-01 night). Each side still works with the objects it always did.
//
// Like the thread, it imports nothing of the project's at run time and uses only TypeScript that
// Node can strip: the thread loads it from its source when the service runs from src/.
import type { ExchangeAnswer, FromEngineIo, ToEngineIo } from './engine-io-thread.js';

/** A flat array of message records, as it goes over. */
export type WireRecords = unknown[];

// Records to the thread: their kinds, and their slots after the kind.
const POST = 0; // id, agent, url, headers (an object, or the number of one defined earlier), payload, timeoutMs, gate limit, gate urgent, counted, digest
const ABORT = 1; // id
const WITHDRAW = 2; // id
const HEADERS = 3; // number, headers: defines headers for later posts
const POST_SLOTS = 11;

// Records from the thread.
const ANSWER = 0; // id, status, retryAfter, requestId, text, digest json, digest usage, digest id, digest model, latencyMs, sent at, sent inFlight, sent limit
const FAILURE = 1; // id, error name, message, code, sent at, sent inFlight, sent limit
const WITHDRAWN = 2; // id
const ANSWER_SLOTS = 14;
const FAILURE_SLOTS = 8;

/**
 * The main loop's writer. Headers go inline the first time an object is seen; one seen again (a
 * replica's own, the same for each of its requests) is defined once and named by its number from
 * then on. Headers made for one request (with its trace context) are never defined, so the thread
 * keeps only the few that are shared.
 */
export class ToThreadWriter {
  private seen = new WeakSet<object>();
  private defined = new WeakMap<object, number>();
  private nextHeaders = 0;

  /** A new thread knows no headers: forget those defined for the one before. */
  reset(): void {
    this.seen = new WeakSet();
    this.defined = new WeakMap();
    this.nextHeaders = 0;
  }

  write(records: WireRecords, message: ToEngineIo): void {
    if (message.kind === 'abort') records.push(ABORT, message.id);
    else if (message.kind === 'withdraw') records.push(WITHDRAW, message.id);
    else {
      const gate = message.gate;
      // Before the post's record: where its headers are defined now, that record must come first.
      const headers = this.headersOf(records, message.headers);
      records.push(POST, message.id, message.agent, message.url, headers, message.payload, message.timeoutMs, gate?.limit, gate?.urgent, message.counted, message.digest === true);
    }
  }

  private headersOf(records: WireRecords, headers: Record<string, string>): Record<string, string> | number {
    const number = this.defined.get(headers);
    if (number !== undefined) return number;
    if (!this.seen.has(headers)) {
      this.seen.add(headers);
      return headers;
    }
    const defining = this.nextHeaders++;
    this.defined.set(headers, defining);
    records.push(HEADERS, defining, headers);
    return defining;
  }
}

/** The thread's reader: each message of the records, in order, as the object it stands for. */
export class ToThreadReader {
  private readonly headers = new Map<number, Record<string, string>>();

  read(records: WireRecords, each: (message: ToEngineIo) => void): void {
    for (let at = 0; at < records.length; ) {
      const kind = records[at];
      if (kind === POST) {
        const headers = records[at + 4] as Record<string, string> | number;
        const limit = records[at + 7] as number | undefined;
        each({
          kind: 'post',
          id: records[at + 1] as number,
          agent: records[at + 2] as string,
          url: records[at + 3] as string,
          headers: typeof headers === 'number' ? this.headers.get(headers)! : headers,
          payload: records[at + 5] as string,
          timeoutMs: records[at + 6] as number,
          gate: limit === undefined ? undefined : { limit, urgent: records[at + 8] === true },
          counted: records[at + 9] === true,
          digest: records[at + 10] === true,
        });
        at += POST_SLOTS;
      } else if (kind === HEADERS) {
        this.headers.set(records[at + 1] as number, records[at + 2] as Record<string, string>);
        at += 3;
      } else {
        each({ kind: kind === ABORT ? 'abort' : 'withdraw', id: records[at + 1] as number });
        at += 2;
      }
    }
  }
}

/** The thread's writer of answers, failures and withdrawals. */
export function writeFromThread(records: WireRecords, message: FromEngineIo): void {
  if ('withdrawn' in message) records.push(WITHDRAWN, message.id);
  else if ('error' in message) {
    const { error, sent } = message;
    records.push(FAILURE, message.id, error.name, error.message, error.code, sent?.at, sent?.inFlight, sent?.limit);
  } else {
    const { digest, sent } = message;
    records.push(ANSWER, message.id, message.status, message.retryAfter, message.requestId, message.text, digest?.json, digest?.usage, digest?.id, digest?.model, message.latencyMs, sent.at, sent.inFlight, sent.limit);
  }
}

/** The main loop's reader: each message of the records, in order, as the object it stands for. */
export function readFromThread(records: WireRecords, each: (message: FromEngineIo) => void): void {
  for (let at = 0; at < records.length; ) {
    const kind = records[at];
    const id = records[at + 1] as number;
    if (kind === ANSWER) {
      const json = records[at + 6] as string | undefined;
      const answer: ExchangeAnswer = {
        id,
        status: records[at + 2] as number,
        retryAfter: records[at + 3] as string | undefined,
        requestId: records[at + 4] as string | undefined,
        text: records[at + 5] as string,
        digest: json === undefined ? undefined : { json, usage: records[at + 7], id: records[at + 8], model: records[at + 9] },
        latencyMs: records[at + 10] as number,
        sent: { at: records[at + 11] as number, inFlight: records[at + 12] as number, limit: records[at + 13] as number | undefined },
      };
      each(answer);
      at += ANSWER_SLOTS;
    } else if (kind === FAILURE) {
      const sentAt = records[at + 5] as number | undefined;
      each({
        id,
        error: { name: records[at + 2] as string, message: records[at + 3] as string, code: records[at + 4] as string | undefined },
        sent: sentAt === undefined ? undefined : { at: sentAt, inFlight: records[at + 6] as number, limit: records[at + 7] as number | undefined },
      });
      at += FAILURE_SLOTS;
    } else {
      each({ id, withdrawn: true });
      at += 2;
    }
  }
}
