// The engine I/O thread (a node:worker_threads worker; engine-io.ts starts it): the HTTP exchanges
// with engine servers, run here so that building requests, writing them to sockets and reading
// the answers do not take the main event loop's time, and so that an exchange's latency is
// measured on a loop that Spool's other work (projections, appends, the API) cannot delay.
//
// It imports nothing of the project's but its messages' wire format (exchange-wire.ts, loaded
// from beside it), and uses only TypeScript that Node can strip, so that it also runs from its
// source when the service runs from src/ in the tests.
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { parentPort } from 'node:worker_threads';
import type { WireRecords } from './exchange-wire.js';

// Compiled JavaScript beside this file, or its TypeScript source when this thread runs from src/
// (a static import would name the compiled file's extension).
const wire: typeof import('./exchange-wire.js') = await import(new URL(import.meta.url.endsWith('.ts') ? './exchange-wire.ts' : './exchange-wire.js', import.meta.url).href);

// Only the connection pool of undici, not its index: the index loads fetch, WebSocket, caches and
// mocks too, about 4 MiB of this thread's heap (of some 20 under load) for nothing used here.
const Pool: typeof import('undici').Pool = createRequire(import.meta.url)('undici/lib/dispatcher/pool.js');
type Pool = InstanceType<typeof Pool>;

/** A POST to send: `agent` names the kept-alive connection pool it goes out on (one per replica). */
export interface ExchangeRequest {
  readonly kind: 'post';
  readonly id: number;
  readonly agent: string;
  readonly url: string;
  /** Without content-length: undici counts the payload's bytes (it encodes a string body itself). */
  readonly headers: Record<string, string>;
  readonly payload: string;
  /** From the time it is sent (not while it is held). */
  readonly timeoutMs: number;
  /**
   * At most `limit` counted exchanges of the same agent run at once; gated ones beyond it are
   * held here, urgent ones first, and each is sent as soon as a counted one ends, without waiting
   * for the main loop. Exchanges without a gate go out at once.
   */
  readonly gate: { readonly limit: number; readonly urgent: boolean } | undefined;
  /**
   * Work that can wait (batch lines), gated or not: it counts against the gate's limit.
   * Interactive requests do not: the limit is what such work may use, and the rest of the
   * engine's slots are kept free for them.
   */
  readonly counted: boolean;
  /**
   * Read the answer here (see AnswerDigest): for batch lines, whose answers the main loop would
   * otherwise parse, and write out twice more (the outcome event, the output file line).
   */
  readonly digest?: boolean;
}

/**
 * An answer read on this thread: its body as compact JSON text (no whitespace outside its
 * strings, so it fits on one line of an output file) and the few fields the main loop needs of
 * it, copied over instead of the whole parsed body. An answer the engine wrote compact already
 * (vLLM's and SGLang's servers do) is kept byte for byte, its numbers as the engine wrote them;
 * any other is written out again as JSON.stringify gives it.
 */
export interface AnswerDigest {
  readonly json: string;
  readonly usage: unknown;
  readonly id: unknown;
  readonly model: unknown;
}

/** The caller gave up on an exchange: it is stopped (or never sent), and nothing is answered for it. */
export interface ExchangeAbort {
  readonly kind: 'abort';
  readonly id: number;
}

/** Withdraw an exchange if it is still held: answered `withdrawn`; one already sent goes on. */
export interface ExchangeWithdraw {
  readonly kind: 'withdraw';
  readonly id: number;
}

export type ToEngineIo = ExchangeRequest | ExchangeAbort | ExchangeWithdraw;

/** A complete answer; latencyMs runs from the request's first byte written to the answer's last byte read. */
export interface ExchangeAnswer {
  readonly id: number;
  readonly status: number;
  readonly retryAfter: string | undefined;
  readonly requestId: string | undefined;
  /** The body as the engine sent it; empty where `digest` holds it. */
  readonly text: string;
  /** Asked for (ExchangeRequest.digest) and the body was a JSON object or array. */
  readonly digest?: AnswerDigest;
  readonly latencyMs: number;
  /** When it was sent (epoch ms), the agent's exchanges running then (itself included), and its gate's limit then. */
  readonly sent: { readonly at: number; readonly inFlight: number; readonly limit: number | undefined };
}

/** A held exchange withdrawn before it was sent. */
export interface ExchangeWithdrawn {
  readonly id: number;
  readonly withdrawn: true;
}

/** No complete answer: no connection, a timeout, or a connection closed mid-answer. */
export interface ExchangeFailure {
  readonly id: number;
  readonly error: { readonly name: string; readonly message: string; readonly code: string | undefined };
  readonly sent: ExchangeAnswer['sent'] | undefined;
}

export type FromEngineIo = ExchangeAnswer | ExchangeFailure | ExchangeWithdrawn;

const port = parentPort;
if (!port) throw new Error('engine-io-thread runs as a worker thread (see engine-io.ts)');

/** Kept-alive connections per replica and origin. */
const pools = new Map<string, Pool>();
/** Split once per address: a batch sends every line to the same few. */
const targets = new Map<string, { origin: string; path: string }>();
/** Exchanges under way or held, so that an abort from the caller finds them. */
const exchanges = new Map<number, Exchange>();

/** Per agent: its exchanges running (all, and those counted against the gate), the gate's latest limit, and those held until one ends. */
interface Gate {
  running: number;
  countedRunning: number;
  limit: number | undefined;
  readonly held: Exchange[];
}
const gates = new Map<string, Gate>();

function gateOf(agent: string): Gate {
  let gate = gates.get(agent);
  if (!gate) {
    gate = { running: 0, countedRunning: 0, limit: undefined, held: [] };
    gates.set(agent, gate);
  }
  return gate;
}

/** Sends held exchanges while the gate has room. */
function release(gate: Gate): void {
  while (gate.held.length > 0 && (gate.limit === undefined || gate.countedRunning < gate.limit)) gate.held.shift()!.start();
}

// Answers that complete in the same turn of this loop go back as one message.
let outbox: WireRecords = [];
const flush = () => {
  const sending = outbox;
  outbox = [];
  port.postMessage(sending);
};
const answer = (message: FromEngineIo) => {
  const first = outbox.length === 0;
  wire.writeFromThread(outbox, message);
  if (first) setImmediate(flush);
};

function targetOf(url: string): { origin: string; path: string } {
  let target = targets.get(url);
  if (!target) {
    const parsed = new URL(url);
    target = { origin: parsed.origin, path: parsed.pathname + parsed.search };
    targets.set(url, target);
  }
  return target;
}

function poolFor(agent: string, origin: string): Pool {
  const key = `${agent} ${origin}`;
  let pool = pools.get(key);
  if (!pool) {
    // The exchange's own timer bounds it (the replica's timeout): no separate limits on headers or body.
    pool = new Pool(origin, { headersTimeout: 0, bodyTimeout: 0 });
    pools.set(key, pool);
  }
  return pool;
}

function failure(id: number, error: Error, sent: ExchangeAnswer['sent'] | undefined): ExchangeFailure {
  return { id, error: { name: error.name, message: error.message, code: (error as NodeJS.ErrnoException).code }, sent };
}

/** Signs of a kept-alive connection the server had just closed when the request went out on it. */
const STALE_CONNECTION = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

/**
 * One POST (undici's dispatcher: about half the cost of node:http per request). A request whose
 * connection is reset before any answer came is sent once more, on a fresh connection.
 */
class Exchange {
  private controller: { abort(reason: Error): void } | undefined;
  private readonly chunks: Buffer[] = [];
  private status = 0;
  private headers: Record<string, string | string[] | undefined> = {};
  private startedAt = 0;
  private sent: ExchangeAnswer['sent'] | undefined;
  private settled = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly request: ExchangeRequest;
  private readonly gate: Gate;
  /** This dispatch may be sent again on a fresh connection (see onResponseError). */
  private retryStale = true;
  /** The server began its answer to this dispatch. */
  private answering = false;

  constructor(request: ExchangeRequest) {
    this.request = request;
    this.gate = gateOf(request.agent);
    if (request.gate) this.gate.limit = request.gate.limit;
    const { limit } = this.gate;
    if (!request.gate || limit === undefined || (this.gate.countedRunning < limit && this.gate.held.length === 0)) this.start();
    else if (request.gate.urgent) this.gate.held.unshift(this);
    else this.gate.held.push(this);
  }

  get held(): boolean {
    return this.sent === undefined && !this.settled;
  }

  start(): void {
    const { request } = this;
    this.gate.running += 1;
    if (request.counted) this.gate.countedRunning += 1;
    this.sent = { at: performance.timeOrigin + performance.now(), inFlight: this.gate.running, limit: request.gate ? this.gate.limit : undefined };
    this.timer = setTimeout(() => {
      const error = new Error(`no answer within ${request.timeoutMs} ms`);
      error.name = 'TimeoutError';
      this.stop(error, true);
    }, request.timeoutMs);
    this.dispatch(true);
  }

  /** Sent in the same turn as others: in flight with all of them (see the message handler). */
  sentTogether(): void {
    if (this.sent && !this.settled) this.sent = { ...this.sent, inFlight: this.gate.running };
  }

  /** The caller gave up: the request is stopped (or never sent) and nothing is answered. */
  abort(): void {
    const error = new Error('The operation was aborted');
    error.name = 'AbortError';
    this.stop(error, false);
  }

  /** Not sent after all, if it is still held. */
  withdraw(): void {
    if (this.held) this.finish({ id: this.request.id, withdrawn: true });
  }

  private stop(error: Error, answerIt: boolean): void {
    if (this.settled) return;
    // Before the request reached a connection there is nothing to abort yet: it is aborted there.
    this.controller?.abort(error);
    this.finish(answerIt ? failure(this.request.id, error, this.sent) : undefined);
  }

  private finish(message: FromEngineIo | undefined): void {
    if (this.settled) return;
    const wasHeld = this.held;
    this.settled = true;
    clearTimeout(this.timer);
    exchanges.delete(this.request.id);
    if (message) answer(message);
    if (wasHeld) {
      const at = this.gate.held.indexOf(this);
      if (at >= 0) this.gate.held.splice(at, 1);
    } else {
      this.gate.running -= 1;
      if (this.request.counted) this.gate.countedRunning -= 1;
      release(this.gate);
    }
  }

  /**
   * The exchange is its own handler of undici's events (its methods below): no closures made per
   * request for them.
   */
  private dispatch(retryStale: boolean): void {
    const { request } = this;
    const target = targetOf(request.url);
    this.startedAt = performance.now();
    this.controller = undefined;
    this.chunks.length = 0;
    this.retryStale = retryStale;
    this.answering = false;
    // No content-length of ours: undici encodes a string body to bytes and writes their length
    // (a copy of the headers and a count of the payload's bytes a request, for nothing).
    poolFor(request.agent, target.origin).dispatch({ origin: target.origin, path: target.path, method: 'POST', headers: request.headers, body: request.payload }, this);
  }

  onRequestStart(controller: { abort(reason: Error): void }): void {
    if (this.settled) controller.abort(new Error('the exchange was already settled'));
    else this.controller = controller;
  }

  onResponseStart(_controller: unknown, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    this.answering = true;
    this.status = statusCode;
    this.headers = headers;
  }

  onResponseData(_controller: unknown, chunk: Buffer): void {
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    const { request } = this;
    const retryAfter = this.headers['retry-after'];
    const requestId = this.headers['x-request-id'];
    const latencyMs = performance.now() - this.startedAt;
    const text = Buffer.concat(this.chunks).toString('utf8');
    const digest = request.digest ? digestOf(text) : undefined;
    this.finish({
      id: request.id,
      status: this.status,
      retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined,
      requestId: typeof requestId === 'string' ? requestId : undefined,
      text: digest ? '' : text,
      digest,
      latencyMs,
      sent: this.sent!,
    });
  }

  onResponseError(_controller: unknown, error: Error): void {
    if (this.settled) return;
    const code = (error as NodeJS.ErrnoException).code;
    if (this.retryStale && !this.answering && code !== undefined && STALE_CONNECTION.has(code)) this.dispatch(false);
    else this.finish(failure(this.request.id, error, this.sent));
  }
}

/** The answer's digest, where it is a JSON object or array; undefined otherwise (the text goes over as it is). */
function digestOf(text: string): AnswerDigest | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof body !== 'object' || body === null) return undefined;
  const fields = body as { usage?: unknown; id?: unknown; model?: unknown };
  // Writing an embeddings answer out again (384 numbers) cost three times its parse. Whitespace
  // around the value (a server's closing line break) is all JSON.parse allows outside it: trimmed.
  const trimmed = text.trim();
  return { json: compactJson(trimmed) ? trimmed : JSON.stringify(body), usage: fields.usage, id: fields.id, model: fields.model };
}

const WHITESPACE = /[ \t\n\r]/;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether JSON text (JSON.parse took it) holds no whitespace outside its strings. Inside a string
 * only a space can be (a raw tab or line break is not JSON), and most answers with any whitespace
 * have it there (a chat answer's words): those are walked character by character.
 */
function compactJson(text: string): boolean {
  if (!WHITESPACE.test(text)) return true;
  let inString = false;
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at);
    if (inString) {
      if (code === BACKSLASH) at += 1;
      else if (code === QUOTE) inString = false;
    } else if (code === QUOTE) inString = true;
    else if (code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09) return false;
  }
  return true;
}


const requests = new wire.ToThreadReader();

port.on('message', (records: WireRecords) => {
  const posted: Exchange[] = [];
  requests.read(records, (message) => {
    if (message.kind === 'post') {
      const exchange = new Exchange(message);
      exchanges.set(message.id, exchange);
      posted.push(exchange);
    } else if (message.kind === 'abort') exchanges.get(message.id)?.abort();
    else exchanges.get(message.id)?.withdraw();
  });
  // Requests sent in one turn of this loop go out together: each went out with all of them in
  // flight. Counted one by one, the first of a burst looked sent with its limit far from full,
  // and the learned limit, which grows only on evidence that it was in use, grew a third slower
  // in slow start.
  for (const exchange of posted) exchange.sentTogether();
});
