import { BuiltinEngine } from '../../src/engine/builtin/builtin-engine.js';
import { BUILTIN_KIND } from '../../src/engine/engine-kinds.js';
import { type Replica, type StagedWeights, sharedWeights } from '../../src/engine/replica.js';

export interface ReloadProbeSettings {
  /** WEIGHT_SYNC_PROBE_PROMPT: the user message of the probe, answered greedily. */
  readonly prompt: string;
  /** WEIGHT_SYNC_PROBE_TIMEOUT_SECONDS, in ms: an answer later than this is a failed probe. */
  readonly timeoutMs: number;
}

/** The probe's request: a short greedy chat, so that the same weights always answer the same. */
export function probeRequest(model: string, prompt: string) {
  return { endpoint: '/v1/chat/completions', body: { model, messages: [{ role: 'user', content: prompt }], max_tokens: 8, temperature: 0, seed: 0 } };
}

const contentOf = (body: unknown): unknown => (body as { choices?: Array<{ message?: { content?: unknown } }> } | null)?.choices?.[0]?.message?.content;

/**
 * Asks one replica, just reloaded and still held out of the scheduling, the probe question, and
 * says what is wrong with its answer (undefined: nothing). Every replica: an answer within the
 * timeout (a reload that hangs, or an engine left paused, answers nothing), with status 200, in
 * the shape of a chat completion (an engine that answers errors or garbled bodies fails here).
 * A built-in replica also: exactly the answer the new checkpoint gives when loaded directly, so
 * weights that did not change (stale) or came out wrong are caught. A server's weights cannot be
 * loaded here to compare with: its answer is checked for shape only.
 */
export async function probeReload(replica: Replica, model: string, staged: StagedWeights, settings: ReloadProbeSettings): Promise<string | undefined> {
  const { endpoint, body } = probeRequest(model, settings.prompt);
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => {
      // Settled before the abort, which makes a replica that honours it reject at once.
      resolve('late');
      abort.abort();
    }, settings.timeoutMs);
  });
  let answer;
  try {
    const answered = await Promise.race([replica.send({ endpoint, body, signal: abort.signal, serviceClass: 'interactive' }), late]);
    if (answered === 'late') return `the probe had no answer within ${settings.timeoutMs / 1000} s`;
    answer = answered;
  } catch (error) {
    return `the probe had no answer: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    clearTimeout(timer);
  }
  if (answer.statusCode !== 200) return `the probe was answered ${answer.statusCode}`;
  const content = contentOf(answer.body);
  if (typeof content !== 'string') return 'the probe was not answered with a chat completion';
  if (replica.kind !== BUILTIN_KIND) return undefined;
  const direct = await new BuiltinEngine(sharedWeights(staged.path), model).infer({ endpoint, body });
  const expected = contentOf(direct.body);
  if (content !== expected) return `the probe was answered ${JSON.stringify(content)}, where the checkpoint loaded directly answers ${JSON.stringify(expected)}`;
  return undefined;
}
