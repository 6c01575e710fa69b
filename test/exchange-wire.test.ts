// The wire format between the main loop and the engine I/O thread (src/engine/io/exchange-wire.ts):
// every message comes out of the records as the object that went in, and headers shared by many
// requests are defined once while those made for one request go inline.
import { describe, expect, it } from 'vitest';
import type { FromEngineIo, ToEngineIo } from '../src/engine/io/engine-io-thread.js';
import { ToThreadReader, ToThreadWriter, type WireRecords, readFromThread, writeFromThread } from '../src/engine/io/exchange-wire.js';

const post = (id: number, headers: Record<string, string>, more: Partial<Extract<ToEngineIo, { kind: 'post' }>> = {}): ToEngineIo => ({
  kind: 'post',
  id,
  agent: 'replica-0',
  url: 'http://127.0.0.1:8000/v1/chat/completions',
  headers,
  payload: '{"model":"m","messages":[{"role":"user","content":"café 😀"}]}',
  timeoutMs: 600_000,
  gate: undefined,
  counted: false,
  digest: false,
  ...more,
});

function toThread(writer: ToThreadWriter, reader: ToThreadReader, messages: readonly ToEngineIo[]): { records: WireRecords; read: ToEngineIo[] } {
  const records: WireRecords = [];
  for (const message of messages) writer.write(records, message);
  // As the thread receives them: a structured clone of the records.
  const read: ToEngineIo[] = [];
  reader.read(structuredClone(records), (message) => read.push(message));
  return { records, read };
}

describe('the engine I/O wire', () => {
  it('carries posts (gated or not, counted, digested), aborts and withdrawals to the thread as they were', () => {
    const headers = { 'content-type': 'application/json' };
    const messages: ToEngineIo[] = [
      post(1, headers),
      post(2, headers, { gate: { limit: 96, urgent: true }, counted: true, digest: true }),
      post(3, headers, { gate: { limit: 1, urgent: false }, counted: true, timeoutMs: 5 }),
      { kind: 'abort', id: 1 },
      { kind: 'withdraw', id: 3 },
    ];
    const { read } = toThread(new ToThreadWriter(), new ToThreadReader(), messages);
    expect(read).toEqual(messages);
  });

  it('defines headers seen a second time once and names them after; headers made for one request go inline', () => {
    const writer = new ToThreadWriter();
    const reader = new ToThreadReader();
    const shared = { 'content-type': 'application/json', authorization: 'Bearer k' };
    const traced = (n: number) => ({ ...shared, traceparent: `00-${String(n).padStart(32, '0')}-b7ad6b7169203331-01` });
    const first = toThread(writer, reader, [post(1, shared), post(2, traced(2))]);
    const later = toThread(writer, reader, [post(3, shared), post(4, shared), post(5, traced(5)), post(6, shared)]);
    expect([...first.read, ...later.read].map((message) => (message.kind === 'post' ? message.headers : undefined))).toEqual([shared, traced(2), shared, shared, traced(5), shared]);
    // The shared headers went whole once, were defined once, and were a number three times.
    const objects = (records: WireRecords) => records.filter((slot) => typeof slot === 'object' && slot !== null && 'authorization' in slot);
    expect(objects(first.records)).toHaveLength(2);
    expect(objects(later.records)).toEqual([shared, traced(5)]);
  });

  it('sends headers whole again to a new thread, which knows none defined for the one before', () => {
    const writer = new ToThreadWriter();
    const shared = { 'content-type': 'application/json' };
    toThread(writer, new ToThreadReader(), [post(1, shared), post(2, shared), post(3, shared)]);
    writer.reset();
    const { read } = toThread(writer, new ToThreadReader(), [post(4, shared), post(5, shared)]);
    expect(read.map((message) => (message.kind === 'post' ? message.headers : undefined))).toEqual([shared, shared]);
  });

  it('carries answers (read on the thread or not), failures (sent or never) and withdrawals back as they were', () => {
    const usage = { prompt_tokens: 3, prompt_tokens_details: { cached_tokens: 1 } };
    const messages: FromEngineIo[] = [
      {
        id: 1,
        status: 200,
        retryAfter: undefined,
        requestId: 'req_1',
        text: '',
        digest: { json: '{"id":"c1","usage":{"prompt_tokens":3}}', usage, id: 'c1', model: 'm' },
        latencyMs: 12.5,
        sent: { at: 1_764_600_000_000.25, inFlight: 17, limit: 96 },
      },
      { id: 2, status: 429, retryAfter: '2', requestId: undefined, text: 'busy', digest: undefined, latencyMs: 0.4, sent: { at: 1, inFlight: 1, limit: undefined } },
      { id: 3, error: { name: 'TimeoutError', message: 'no answer within 5 ms', code: undefined }, sent: { at: 2, inFlight: 3, limit: 4 } },
      { id: 4, error: { name: 'Error', message: 'connect ECONNREFUSED', code: 'ECONNREFUSED' }, sent: undefined },
      { id: 5, withdrawn: true },
    ];
    const records: WireRecords = [];
    for (const message of messages) writeFromThread(records, message);
    const read: FromEngineIo[] = [];
    readFromThread(structuredClone(records), (message) => read.push(message));
    expect(read).toEqual(messages);
    // Records of primitives and the answers' usage only: no message object goes over whole.
    expect(records.filter((slot) => typeof slot === 'object' && slot !== null)).toEqual([usage]);
  });
});
