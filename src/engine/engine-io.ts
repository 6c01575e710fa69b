import { Worker } from 'node:worker_threads';
import type { ExchangeAnswer, FromEngineIo, ToEngineIo } from './engine-io-thread.js';

export type { ExchangeAnswer } from './engine-io-thread.js';

interface Pending {
  resolve(answer: ExchangeAnswer): void;
  reject(error: Error): void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/** The thread's module: compiled JavaScript beside this file, or its TypeScript source when running from src/. */
const threadModule = new URL(import.meta.url.endsWith('.ts') ? './engine-io-thread.ts' : './engine-io-thread.js', import.meta.url);

function abortError(signal: AbortSignal): Error {
  const error = new Error('The operation was aborted', { cause: signal.reason });
  error.name = 'AbortError';
  return error;
}

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
  private outbox: ToEngineIo[] = [];
  private nextId = 1;

  /**
   * Sends one POST over the kept-alive connections named `agent`. Rejects when there is no
   * complete answer (an Error whose name is TimeoutError after timeoutMs), or when `signal` aborts.
   */
  post(agent: string, url: string, headers: Record<string, string>, payload: string, timeoutMs: number, signal?: AbortSignal): Promise<ExchangeAnswer> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    const id = this.nextId++;
    return new Promise<ExchangeAnswer>((resolve, reject) => {
      const onAbort = signal
        ? () => {
            if (!this.pending.has(id)) return;
            this.settled(id);
            this.send({ kind: 'abort', id });
            reject(abortError(signal));
          }
        : undefined;
      if (signal && onAbort) signal.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, { resolve, reject, signal, onAbort });
      if (this.pending.size === 1) this.thread().ref();
      this.send({ kind: 'post', id, agent, url, headers, payload, timeoutMs });
    });
  }

  private send(message: ToEngineIo): void {
    if (this.outbox.push(message) > 1) return;
    // After the current run of callbacks and promise continuations: every request they made goes over together.
    process.nextTick(() => {
      const sending = this.outbox;
      this.outbox = [];
      if (sending.length > 0) this.worker?.postMessage(sending);
    });
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(threadModule, { resourceLimits: { maxYoungGenerationSizeMb: 4 } });
    worker.on('message', (answers: FromEngineIo[]) => {
      for (const answer of answers) {
        const pending = this.settled(answer.id);
        if (!pending) continue;
        if ('error' in answer) {
          const error = new Error(answer.error.message) as NodeJS.ErrnoException;
          error.name = answer.error.name;
          if (answer.error.code !== undefined) error.code = answer.error.code;
          pending.reject(error);
        } else {
          pending.resolve(answer);
        }
      }
    });
    const lost = (reason: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.outbox = [];
      for (const id of [...this.pending.keys()]) this.settled(id)?.reject(new Error(`the engine I/O thread stopped: ${reason}`));
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
