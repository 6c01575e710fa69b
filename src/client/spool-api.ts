// The client's side of a running Spool: the official openai package for /v1 (files and batches),
// plain fetch for what it does not cover (/mgmt/v1 with the API key, a batch's live event stream).
import OpenAI from 'openai';

export interface Connection {
  /** Where Spool serves: --base-url or SPOOL_BASE_URL (default http://127.0.0.1:8080). */
  readonly baseUrl: string;
  /** --api-key or SPOOL_API_KEY: for /mgmt/v1 (jobs, weights). */
  readonly apiKey: string | undefined;
}

/** An answer of Spool's that is an error: its status and OpenAI-shaped message. */
export class ServiceError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export class SpoolApi {
  readonly openai: OpenAI;

  constructor(readonly connection: Connection) {
    // /v1 takes no credential unless accounts are on; then the API key is an account's key.
    this.openai = new OpenAI({ baseURL: `${connection.baseUrl}/v1`, apiKey: connection.apiKey ?? 'unused', maxRetries: 2 });
  }

  /** A JSON request to Spool, its parsed answer; an error answer throws a ServiceError naming it. */
  async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await fetch(`${this.connection.baseUrl}${path}`, {
      method,
      headers: { ...(this.connection.apiKey ? { authorization: `Bearer ${this.connection.apiKey}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    const parsed = text ? (JSON.parse(text) as unknown) : undefined;
    if (!response.ok) {
      const message = (parsed as { error?: { message?: string } } | undefined)?.error?.message ?? text;
      throw new ServiceError(response.status, `${method} ${path} answered ${response.status}: ${message}${response.status === 401 ? ' (set --api-key or SPOOL_API_KEY)' : ''}`);
    }
    return parsed as T;
  }

  /**
   * A batch's events, from the start (or after `after`), as they are recorded; ends after its
   * terminal event. Reconnects after a cut with the last id received, as an EventSource does.
   */
  async *events(batchId: string, signal: AbortSignal): AsyncGenerator<{ id: string; type: string; data: Record<string, unknown> }> {
    let last: string | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        const response = await fetch(`${this.connection.baseUrl}/v1/batches/${encodeURIComponent(batchId)}/events?stream=true`, {
          headers: { accept: 'text/event-stream', ...(last ? { 'last-event-id': last } : {}), ...(this.connection.apiKey ? { authorization: `Bearer ${this.connection.apiKey}` } : {}) },
          signal,
        });
        if (!response.ok || !response.body) throw new ServiceError(response.status, `the events of ${batchId} answered ${response.status}: ${await response.text()}`);
        const decoder = new TextDecoder();
        let pending = '';
        let ended = false;
        for await (const piece of response.body) {
          pending += decoder.decode(piece as Uint8Array, { stream: true });
          let end: number;
          while ((end = pending.indexOf('\n\n')) >= 0) {
            const message = pending.slice(0, end);
            pending = pending.slice(end + 2);
            const data = message
              .split('\n')
              .filter((line) => line.startsWith('data:'))
              .map((line) => line.slice(5).trimStart())
              .join('\n');
            if (!data) continue;
            const event = JSON.parse(data) as { id: string; type: string; data: Record<string, unknown> };
            last = event.id;
            yield event;
            if (/^Batch(Completed|Failed|Expired|Cancelled)$/.test(event.type)) ended = true;
          }
        }
        if (ended) return;
      } catch (error) {
        if (signal.aborted || error instanceof ServiceError || attempt >= 5) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** Math.min(attempt, 4)));
    }
  }
}
