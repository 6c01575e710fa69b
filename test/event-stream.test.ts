import { randomUUID } from 'node:crypto';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatLine, createBatch, reserveJob, waitForStatus } from './support/batch-helpers.js';
import { FakeEngine } from './support/fake-engine.js';
import { type WholeService, startTestService } from './support/service.js';

const JOB = { job_id: 'stream-job', model: 'tiny-chat', use_case: 'stream', sla: '24h', price_1m_tokens: 1 };
const IDLE_TIMEOUT_SECONDS = 1;
// Longer than the idle timeout: the silences between heartbeats still outlast it.
const HEARTBEAT_SECONDS = 2;

interface Message {
  id: string;
  event: string;
  data: { id: string; type: string; [key: string]: unknown };
}

/** One server-sent-events stream, read as it arrives: its messages, its comments, and when it ended. */
class EventStreamReader {
  readonly messages: Message[] = [];
  comments = 0;
  ended = false;
  private readonly abort = new AbortController();
  private readonly done: Promise<void>;
  private arrivals: Array<() => void> = [];

  constructor(readonly response: Response) {
    this.done = this.read();
  }

  static async open(url: string, headers: Record<string, string> = {}): Promise<EventStreamReader> {
    const controller = new AbortController();
    const response = await fetch(url, { headers, signal: controller.signal });
    const reader = new EventStreamReader(response);
    reader.abort.signal.addEventListener('abort', () => controller.abort());
    return reader;
  }

  private async read(): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of this.response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          this.take(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
        for (const arrival of this.arrivals.splice(0)) arrival();
      }
      expect(buffer).toBe('');
      this.ended = true;
    } catch (error) {
      if (!this.abort.signal.aborted) throw error;
    } finally {
      for (const arrival of this.arrivals.splice(0)) arrival();
    }
  }

  private take(block: string): void {
    const fields: Record<string, string> = {};
    let comment = false;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) comment = true;
      else {
        const colon = line.indexOf(': ');
        fields[line.slice(0, colon)] = line.slice(colon + 2);
      }
    }
    if (comment && Object.keys(fields).length === 0) this.comments++;
    else this.messages.push({ id: fields.id!, event: fields.event!, data: JSON.parse(fields.data!) });
  }

  /** Resolves once `count` messages have arrived (or the stream ended before). */
  async until(count: number, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.messages.length < count && !this.ended) {
      if (Date.now() > deadline) throw new Error(`only ${this.messages.length} of ${count} messages within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        this.arrivals.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  }

  async finished(): Promise<void> {
    await this.done;
  }

  disconnect(): Promise<void> {
    this.abort.abort();
    return this.done;
  }
}

describe('the live event stream of a batch', () => {
  const engine = new FakeEngine();
  let service: WholeService;
  let client: OpenAI;
  let stopped = false;

  const listAll = async (batchId: string) => {
    const answer = await fetch(`${service.url}/v1/batches/${batchId}/events?limit=1000`);
    expect(answer.status).toBe(200);
    const body = (await answer.json()) as { data: Array<Message['data']>; has_more: boolean };
    expect(body.has_more).toBe(false);
    return body.data;
  };

  const submit = async (lines: string[]) => {
    const input = await client.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'stream.jsonl'), purpose: 'batch' });
    return createBatch(client, { input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: 'unlimited', job_id: JOB.job_id });
  };

  const streamUrl = (batchId: string, query = '') => `${service.url}/v1/batches/${batchId}/events?stream=true${query}`;

  beforeAll(async () => {
    await engine.start();
    service = await startTestService({
      env: { ENGINE_BASE_URL: engine.url, ENGINE_BACKOFF_MS: '10', ENGINE_MAX_ATTEMPTS: '2', ENGINE_CONCURRENCY: '1', BATCH_CHUNK_LINES: '2', HTTP_IDLE_TIMEOUT_SECONDS: String(IDLE_TIMEOUT_SECONDS), HTTP_EVENT_STREAM_HEARTBEAT_SECONDS: String(HEARTBEAT_SECONDS) },
    });
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    expect((await reserveJob(service.url, JOB)).status).toBe(201);
  });
  afterAll(async () => {
    if (!stopped) await service?.close();
    await engine.stop();
  });

  it('sends the history so far, then each event as it is recorded, through a quiet spell longer than the idle timeout, and closes after the terminal event', async () => {
    // One line waits longer than the idle timeout: the stream must outlive the quiet spell.
    const lines = [chatLine('a', 'one [slow:200]'), chatLine('b', `two [slow:${HEARTBEAT_SECONDS * 1000 + 500}]`), chatLine('c', 'three [slow:200]'), chatLine('d', 'four [slow:200]')];
    const batch = await submit(lines);
    await waitForStatus(client, batch.id, ['in_progress']);
    const stream = await EventStreamReader.open(streamUrl(batch.id));
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(stream.response.headers.get('cache-control')).toContain('no-cache');
    await stream.until(1);
    const firstArrived = stream.messages.length;
    await stream.finished();
    expect(stream.ended).toBe(true);

    const listed = await listAll(batch.id);
    expect(stream.messages.length).toBeGreaterThan(firstArrived); // some arrived live, not all at once
    expect(stream.messages.map((message) => message.id)).toEqual(listed.map((event) => event.id));
    expect(stream.messages.map((message) => message.event)).toEqual(listed.map((event) => event.type));
    expect(stream.messages.map((message) => message.data)).toEqual(listed);
    expect(stream.messages.filter((message) => message.event === 'LineCompleted')).toHaveLength(4);
    expect(stream.messages.at(-1)!.event).toBe('BatchCompleted');
    expect(stream.comments).toBeGreaterThanOrEqual(1); // the heartbeat, during the quiet spell
  });

  it('resumes from Last-Event-ID after a disconnect with no gap and no repeat', async () => {
    const lines = Array.from({ length: 6 }, (_, index) => chatLine(`r${index}`, `line ${index} [slow:250]`));
    const batch = await submit(lines);
    const first = await EventStreamReader.open(streamUrl(batch.id));
    await first.until(3);
    await first.disconnect();
    expect(first.ended).toBe(false);
    const received = [...first.messages];
    const lastId = received.at(-1)!.id;

    const second = await EventStreamReader.open(streamUrl(batch.id), { 'last-event-id': lastId });
    expect(second.response.status).toBe(200);
    await second.finished();
    expect(second.ended).toBe(true);
    expect(second.messages[0]!.id).not.toBe(lastId);

    const listed = await listAll(batch.id);
    const union = [...received, ...second.messages].map((message) => message.id);
    expect(new Set(union).size).toBe(union.length);
    expect(union).toEqual(listed.map((event) => event.id));
    expect(listed.at(-1)!.type).toBe('BatchCompleted');
  });

  it('starts after the `after` cursor like the list, and sends a finished batch its history then closes', async () => {
    const batch = await submit([chatLine('x', 'one'), chatLine('y', 'two [fail:400]')]);
    await waitForStatus(client, batch.id, ['completed']);
    const listed = await listAll(batch.id);

    const whole = await EventStreamReader.open(streamUrl(batch.id));
    await whole.finished();
    expect(whole.ended).toBe(true);
    expect(whole.messages.map((message) => message.data)).toEqual(listed);
    expect(whole.messages.map((message) => message.event)).toContain('LineFailed');

    const blankLastId = await EventStreamReader.open(streamUrl(batch.id), { 'last-event-id': '' });
    await blankLastId.finished();
    expect(blankLastId.messages.map((message) => message.id)).toEqual(listed.map((event) => event.id));

    const rest = await EventStreamReader.open(streamUrl(batch.id, `&after=${listed[1]!.id}`));
    await rest.finished();
    expect(rest.messages.map((message) => message.id)).toEqual(listed.slice(2).map((event) => event.id));
  });

  it('refuses an unknown batch or cursor in the JSON envelope, before any stream starts', async () => {
    const unknown = await fetch(streamUrl('batch_doesnotexist'));
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await unknown.json()) as any).error).toMatchObject({ type: 'invalid_request_error', param: 'batch_id' });

    const batch = await submit([chatLine('x', 'one')]);
    await waitForStatus(client, batch.id, ['completed']);
    const badCursor = await fetch(streamUrl(batch.id, `&after=${randomUUID()}`));
    expect(badCursor.status).toBe(400);
    expect(((await badCursor.json()) as any).error).toMatchObject({ param: 'after' });
    const badLastId = await fetch(streamUrl(batch.id), { headers: { 'last-event-id': randomUUID() } });
    expect(badLastId.status).toBe(400);
    expect(((await badLastId.json()) as any).error.message).toContain('Last-Event-ID');
    const malformedLastId = await fetch(streamUrl(batch.id), { headers: { 'last-event-id': 'not-an-id' } });
    expect(malformedLastId.status).toBe(400);
    expect(((await malformedLastId.json()) as any).error.message).toContain('Last-Event-ID');
  });

  it('lets go of a stream whose client went away', async () => {
    const batch = await submit([chatLine('a', 'one [slow:3000]')]);
    const stream = await EventStreamReader.open(streamUrl(batch.id));
    await stream.until(1);
    const followers = () => service.projector.listenerCount;
    const withStream = followers();
    await stream.disconnect();
    const deadline = Date.now() + 5000;
    while (followers() >= withStream && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(followers()).toBe(withStream - 1);
    await waitForStatus(client, batch.id, ['completed']);
  });

  it('ends the streams still open when the service stops, rather than waiting for their batches', async () => {
    const batch = await submit([chatLine('a', 'one [slow:20000]')]);
    const stream = await EventStreamReader.open(streamUrl(batch.id));
    await stream.until(1);
    const started = Date.now();
    await service.close();
    stopped = true;
    await stream.finished();
    expect(stream.ended).toBe(true);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
