import { Worker } from 'node:worker_threads';
import { RequestWithdrawnError } from '../engine.js';
import type { ExchangeAnswer, ToEngineIo } from './engine-io-thread.js';
import { ToThreadWriter, type WireRecords, readFromThread } from './exchange-wire.js';

export type { AnswerDigest, ExchangeAnswer } from './engine-io-thread.js';

/** When the exchange was sent, as the thread saw it. */
export type ExchangeSent = ExchangeAnswer['sent'];

export interface ExchangeOptions {
  readonly signal?: AbortSignal | undefined;
  /**
   * Hold the exchange in the thread while `limit` exchanges of its agent run, and send it as soon
   * as one ends; urgent ones are sent first.
   */
  readonly gate?: { readonly limit: number; readonly urgent: boolean } | undefined;
  /**
   * Work that can wait (batch, background): counted against the agent's gate whether or not it
   * came through it; interactive requests are not.
   */
  readonly counted?: boolean | undefined;
  /** For a held exchange: true once it should not be sent after all (it then rejects with RequestWithdrawnError). */
  readonly withdraw?: (() => boolean) | undefined;
  /** Have the thread read the answer (ExchangeAnswer.digest): for answers the main loop would only parse to write out again. */
  readonly digest?: boolean | undefined;
}

/** Hears how an exchange ended: once, with its answer or its error. */
export interface ExchangeListener {
  answered(answer: ExchangeAnswer): void;
  failed(error: Error): void;
}

interface Pending {
  readonly listener: ExchangeListener;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  /** Set for held exchanges that may be withdrawn; cleared once withdrawal was asked. */
  withdraw: (() => boolean) | undefined;
}

/** How often held exchanges are checked for withdrawal: a batch stopped is seen within this. */
const WITHDRAW_CHECK_MS = 10;

/** The thread's module: compiled JavaScript beside this file, or its TypeScript source when running from src/. */
const threadModule = new URL(import.meta.url.endsWith('.ts') ? './engine-io-thread.ts' : './engine-io-thread.js', import.meta.url);

function abortError(signal: AbortSignal): Error {
  const error = new Error('The operation was aborted', { cause: signal.reason });
  error.name = 'AbortError';
  return error;
}

/** An exchange that failed, with when it had been sent (undefined: never). */
export type ExchangeError = Error & { sent?: ExchangeSent };

/**
 * The main loop's side of the engine I/O thread (engine-io-thread.ts): hands it request bodies and
 * settles each exchange with its answer. Requests made in one turn of the event loop go over as
 * one message, and so do the answers that come back together. The thread is started on the first
 * request, keeps the process alive only while exchanges are outstanding, and is started again if
 * it ever dies (its outstanding exchanges fail, as a dropped connection would).
 */
export class EngineIo {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private outbox: WireRecords = [];
  private readonly writer = new ToThreadWriter();
  private nextId = 1;
  private withdrawals: NodeJS.Timeout | undefined;

  /**
   * Sends one POST over the kept-alive connections named `agent`. Rejects when there is no
   * complete answer (an Error whose name is TimeoutError after timeoutMs), when `signal` aborts,
   * or with RequestWithdrawnError when a held exchange is withdrawn.
   */
  post(agent: string, url: string, headers: Record<string, string>, payload: string, timeoutMs: number, options: ExchangeOptions = {}): Promise<ExchangeAnswer> {
    return new Promise<ExchangeAnswer>((resolve, reject) => this.postTo(agent, url, headers, payload, timeoutMs, options, { answered: resolve, failed: reject }));
  }

  /**
   * post() for a caller that listens rather than awaits: no promise an exchange (every batch line
   * is one, and what it holds while it waits and runs outlives young collections).
   */
  postTo(agent: string, url: string, headers: Record<string, string>, payload: string, timeoutMs: number, options: ExchangeOptions, listener: ExchangeListener): void {
    const { signal, gate } = options;
    if (signal?.aborted) return listener.failed(abortError(signal));
    const id = this.nextId++;
    const onAbort = signal
      ? () => {
          if (!this.pending.has(id)) return;
          this.settled(id);
          this.send({ kind: 'abort', id });
          listener.failed(abortError(signal));
        }
      : undefined;
    if (signal && onAbort) signal.addEventListener('abort', onAbort, { once: true });
    const withdraw = gate ? options.withdraw : undefined;
    this.pending.set(id, { listener, signal, onAbort, withdraw });
    if (this.pending.size === 1) this.thread().ref();
    if (withdraw) this.withdrawals ??= setInterval(() => this.checkWithdrawals(), WITHDRAW_CHECK_MS).unref();
    this.send({ kind: 'post', id, agent, url, headers, payload, timeoutMs, gate, counted: options.counted ?? gate !== undefined, digest: options.digest === true });
  }

  private send(message: ToEngineIo): void {
    const first = this.outbox.length === 0;
    this.writer.write(this.outbox, message);
    if (!first) return;
    // After the current run of callbacks and promise continuations: every request they made goes over together.
    process.nextTick(() => {
      const sending = this.outbox;
      this.outbox = [];
      if (sending.length > 0) this.worker?.postMessage(sending);
    });
  }

  /** Asks the thread to withdraw each held exchange whose caller no longer wants it sent (a batch stopped). */
  private checkWithdrawals(): void {
    let watched = 0;
    for (const [id, pending] of this.pending) {
      if (!pending.withdraw) continue;
      if (pending.withdraw()) {
        pending.withdraw = undefined;
        this.send({ kind: 'withdraw', id });
      } else {
        watched += 1;
      }
    }
    if (watched === 0) {
      clearInterval(this.withdrawals);
      this.withdrawals = undefined;
    }
  }

  /**
   * Starts the thread now rather than on the first request: starting it takes tens of
   * milliseconds, which the first request (often an interactive one) must not wait for. It does
   * not keep the process alive while nothing is outstanding.
   */
  start(): void {
    const worker = this.thread();
    if (this.pending.size === 0) worker.unref();
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    // A small young generation: the thread's garbage is short-lived, and each isolate's default is sized for a whole process.
    const worker = new Worker(threadModule, { resourceLimits: { maxYoungGenerationSizeMb: 4 } });
    // A new thread knows none of the headers defined for one before it.
    this.writer.reset();
    worker.on('message', (records: WireRecords) => {
      readFromThread(records, (answer) => {
        const pending = this.settled(answer.id);
        if (!pending) return;
        if ('withdrawn' in answer) {
          pending.listener.failed(new RequestWithdrawnError('withdrawn before it was sent'));
        } else if ('error' in answer) {
          const error = new Error(answer.error.message) as ExchangeError & NodeJS.ErrnoException;
          error.name = answer.error.name;
          if (answer.error.code !== undefined) error.code = answer.error.code;
          if (answer.sent) error.sent = answer.sent;
          pending.listener.failed(error);
        } else {
          pending.listener.answered(answer);
        }
      });
    });
    const lost = (reason: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.outbox = [];
      for (const id of [...this.pending.keys()]) this.settled(id)?.listener.failed(new Error(`the engine I/O thread stopped: ${reason}`));
    };
    worker.on('error', (error) => lost(error.message));
    worker.on('exit', (code) => lost(`exit code ${code}`));
    this.worker = worker;
    return worker;
  }

  /** Forgets an exchange; the thread is no reason to keep the process alive once none is outstanding. */
  private settled(id: number): Pending | undefined {
    const pending = this.pending.get(id);
    if (!pending) return undefined;
    this.pending.delete(id);
    if (pending.signal && pending.onAbort) pending.signal.removeEventListener('abort', pending.onAbort);
    if (this.pending.size === 0) this.worker?.unref();
    return pending;
  }
}

/** One engine I/O thread per process, shared by every HTTP replica. */
export const engineIo = new EngineIo();
