import { randomUUID } from 'node:crypto';
import { ConcurrencyLimit } from './concurrency-limit.js';
import { type EngineRequest, type EngineResponse, EngineUnavailableError, type InferenceEngine, RequestWithdrawnError } from './engine.js';

export interface HttpEngineSettings {
  /** The server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1. */
  readonly baseUrl: string;
  readonly apiKey?: string;
  /** Requests in flight at once. */
  readonly concurrency: number;
  readonly timeoutMs: number;
  /** Attempts per request, the first included. */
  readonly maxAttempts: number;
  /** First retry delay; doubled each time, with jitter, at most 10 s. */
  readonly backoffMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * An OpenAI-compatible HTTP inference server (vLLM, SGLang, llama.cpp, OpenAI). Transient
 * failures (no connection, timeout, 429, 5xx) are retried with backoff; other answers, errors
 * included, are returned as they came.
 */
export class OpenAiHttpEngine implements InferenceEngine {
  readonly description: string;
  private readonly limit: ConcurrencyLimit;

  constructor(private readonly settings: HttpEngineSettings) {
    this.limit = new ConcurrencyLimit(settings.concurrency);
    this.description = `openai-compatible ${settings.baseUrl}`;
  }

  async infer(request: EngineRequest): Promise<EngineResponse> {
    const url = this.settings.baseUrl.replace(/\/+$/, '') + request.endpoint.replace(/^\/v1/, '');
    let lastResponse: EngineResponse | undefined;
    let lastError = 'no attempt made';
    for (let attempt = 1; attempt <= this.settings.maxAttempts; attempt++) {
      let retryAfterMs: number | undefined;
      try {
        const response = await this.limit.run(() => {
          if (request.withdraw?.()) throw new RequestWithdrawnError('withdrawn before it was sent');
          return this.post(url, request);
        });
        if (response.statusCode !== 429 && response.statusCode < 500) return response;
        lastResponse = response;
        lastError = `engine answered ${response.statusCode}`;
        retryAfterMs = response.retryAfterMs;
      } catch (error) {
        if (request.signal?.aborted || error instanceof RequestWithdrawnError) throw error;
        lastError = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      }
      if (attempt < this.settings.maxAttempts) {
        const backoff = Math.min(10_000, this.settings.backoffMs * 2 ** (attempt - 1));
        await sleep(retryAfterMs ?? backoff * (0.5 + Math.random() / 2));
      }
    }
    if (lastResponse) return lastResponse;
    throw new EngineUnavailableError(`${this.description} gave no answer after ${this.settings.maxAttempts} attempts: ${lastError}`);
  }

  private async post(url: string, request: EngineRequest): Promise<EngineResponse & { retryAfterMs?: number }> {
    const timeout = AbortSignal.timeout(this.settings.timeoutMs);
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(this.settings.apiKey ? { authorization: `Bearer ${this.settings.apiKey}` } : {}),
      },
      body: JSON.stringify(request.body),
      signal: request.signal ? AbortSignal.any([timeout, request.signal]) : timeout,
    });
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON: kept as text, so the error file shows what the engine said.
    }
    const retryAfter = Number(response.headers.get('retry-after'));
    return {
      statusCode: response.status,
      requestId: response.headers.get('x-request-id') ?? `req_${randomUUID().replace(/-/g, '')}`,
      body,
      ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterMs: Math.min(30_000, retryAfter * 1000) } : {}),
    };
  }
}

/** Every model (or the listed ones) served by one engine. */
export class SingleEngineDirectory {
  constructor(private readonly engine: InferenceEngine | undefined, private readonly models: readonly string[] | '*') {}

  engineFor(model: string): InferenceEngine | undefined {
    if (!this.engine) return undefined;
    return this.models === '*' || this.models.includes(model) ? this.engine : undefined;
  }
}
