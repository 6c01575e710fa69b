import { JsonText } from '../../domain/json-text.js';
import { newEngineRequestId } from '../../platform/ids.js';
import type { EngineRequest } from '../engine.js';
import { MINILM_KIND } from '../engine-kinds.js';
import type { Replica, ReplicaResponse } from '../replica.js';
import { MINILM_ARTIFACT, MINILM_MODEL } from './minilm-files.js';
import type { MiniLmModel } from './minilm-model.js';
import { DIMENSIONS, type SentenceEmbedder, type TokenIds, type VectorFormat } from './sentence-embedder.js';

/** OpenAI's bound on the inputs of one embeddings request. */
const MAX_INPUTS = 2048;

/** A request the model refuses: answered as an OpenAI 400. */
class BadRequest extends Error {
  constructor(
    message: string,
    readonly param: string | null,
    readonly code = 'invalid_value',
  ) {
    super(message);
  }
}

/** The inputs of an embeddings request as the model reads them: strings, or arrays of its vocabulary's token ids. */
function inputsOf(input: unknown, embedder: SentenceEmbedder): TokenIds[] {
  const one = (value: unknown, param: string): TokenIds => {
    if (typeof value === 'string') return embedder.tokenize(value);
    if (Array.isArray(value) && value.length > 0 && value.every((id) => Number.isInteger(id) && id >= 0 && id < embedder.vocabularySize)) return embedder.frame(value as number[]);
    throw new BadRequest(`${param} must be a string or a non-empty array of token ids from 0 to ${embedder.vocabularySize - 1}`, 'input');
  };
  if (typeof input === 'string') return [one(input, 'input')];
  if (Array.isArray(input) && input.length > 0) {
    if (input.every((item) => typeof item === 'number')) return [one(input, 'input')];
    if (input.length > MAX_INPUTS) throw new BadRequest(`input holds ${input.length} items; at most ${MAX_INPUTS} per request`, 'input', 'too_many_inputs');
    return input.map((item, index) => one(item, `input[${index}]`));
  }
  throw new BadRequest('input must be a non-empty string or array', 'input');
}

/**
 * The built-in embedding model as a replica of its pool: /v1/embeddings only, in OpenAI's shape
 * (`encoding_format` float or base64; `dimensions` 384 or absent). `usage` counts the tokens the
 * model read, [CLS] and [SEP] included: an input longer than MAX_INPUT_TOKENS counts the tokens
 * kept. Several replicas of one process share its one loaded model.
 */
export class MiniLmReplica implements Replica {
  readonly kind = MINILM_KIND;
  readonly weightsInProcess = true;
  readonly holdsRequests = false;
  readonly capacityKnown = true;
  readonly servedManifest = undefined;
  readonly servedCheckpoint = `maven:${MINILM_ARTIFACT.groupId}:${MINILM_ARTIFACT.artifactId}:${MINILM_ARTIFACT.version}`;
  readonly description = `built-in ${MINILM_MODEL} (onnxruntime, CPU)`;

  constructor(
    readonly id: string,
    private readonly model: MiniLmModel,
    /** The name the fleet serves it under. */
    private readonly modelName: string,
  ) {}

  async send(request: EngineRequest): Promise<ReplicaResponse> {
    const requestId = newEngineRequestId();
    const refuse = (error: BadRequest): ReplicaResponse => ({ statusCode: 400, requestId, body: { error: { message: error.message, type: 'invalid_request_error', param: error.param, code: error.code } } });
    if (request.endpoint !== '/v1/embeddings') return refuse(new BadRequest(`${this.modelName} is an embedding model: it serves /v1/embeddings only, not ${request.endpoint}`, null, 'unsupported_endpoint'));
    const { body } = request;
    const format = (body.encoding_format ?? 'float') as VectorFormat;
    if (format !== 'float' && format !== 'base64') return refuse(new BadRequest('encoding_format must be float or base64', 'encoding_format'));
    if (body.dimensions !== undefined && body.dimensions !== null && body.dimensions !== DIMENSIONS) {
      return refuse(new BadRequest(`dimensions must be ${DIMENSIONS}: ${this.modelName}'s vectors cannot be shortened`, 'dimensions'));
    }
    const embedder = await this.model.embedder();
    let inputs: TokenIds[];
    try {
      inputs = inputsOf(body.input, embedder);
    } catch (error) {
      if (error instanceof BadRequest) return refuse(error);
      throw error;
    }
    request.signal?.throwIfAborted();
    const { texts } = await embedder.embedAsJson(inputs, format);
    const tokens = inputs.reduce((sum, ids) => sum + ids.length, 0);
    const usage = { prompt_tokens: tokens, total_tokens: tokens };
    // The body as text, its vectors written on the model's thread: a batch line's answer is only
    // written out (its outcome event, its output line), as the engine I/O thread's digest is.
    const data = texts.map((text, index) => `{"object":"embedding","index":${index},"embedding":${text}}`).join(',');
    const json = `{"object":"list","data":[${data}],"model":${JSON.stringify(this.modelName)},"usage":${JSON.stringify(usage)}}`;
    if ((request.serviceClass ?? 'interactive') === 'interactive') return { statusCode: 200, requestId, body: JSON.parse(json) };
    return { statusCode: 200, requestId, body: new JsonText(json), bodyFields: { usage, id: undefined, model: this.modelName } };
  }

  /** Healthy unless its files cannot be had: then its pool leaves it out and /ready says why. */
  async health(): Promise<boolean> {
    return this.model.state.state !== 'unavailable';
  }

  warning(): string | undefined {
    const { state } = this.model;
    return state.state === 'unavailable' ? `model ${this.modelName} is not served: ${state.reason}` : undefined;
  }

  async reload(): Promise<void> {
    throw new Error(`${this.modelName} is a built-in model: it takes no weight syncs`);
  }

  priorityFields(): undefined {
    return undefined;
  }
}
