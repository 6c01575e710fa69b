import { loadGaugeNames } from './engine-kinds.js';

/** An engine's own view of its load, from its Prometheus metrics. */
export interface EngineLoad {
  /** Requests in the engine's running batch. */
  readonly running?: number;
  /** Requests queued inside the engine, waiting for a place in the batch. */
  readonly waiting?: number;
  /** KV-cache usage, 0–1. */
  readonly kvUsage?: number;
}

export interface MetricSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;

/** One sample line, or undefined when the line is not one. */
function parseLine(line: string): MetricSample | undefined {
  const name = NAME.exec(line)?.[0];
  if (!name) return undefined;
  let rest = line.slice(name.length);
  const labels: Record<string, string> = {};
  if (rest.startsWith('{')) {
    let i = 1;
    for (;;) {
      while (rest[i] === ' ' || rest[i] === ',') i++;
      if (rest[i] === '}') break;
      const labelName = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(rest.slice(i))?.[0];
      if (!labelName || rest[i + labelName.length] !== '=' || rest[i + labelName.length + 1] !== '"') return undefined;
      i += labelName.length + 2;
      let value = '';
      for (;;) {
        const char = rest[i];
        if (char === undefined) return undefined;
        if (char === '"') break;
        if (char === '\\') {
          const escaped = rest[i + 1];
          value += escaped === 'n' ? '\n' : (escaped ?? '');
          i += 2;
        } else {
          value += char;
          i += 1;
        }
      }
      labels[labelName] = value;
      i += 1;
    }
    rest = rest.slice(i + 1);
  }
  const fields = rest.trim().split(/\s+/);
  const text = fields[0];
  if (!text || fields.length > 2 || (rest.length > 0 && !/^\s/.test(rest))) return undefined;
  const value = text === '+Inf' ? Number.POSITIVE_INFINITY : text === '-Inf' ? Number.NEGATIVE_INFINITY : text === 'NaN' ? Number.NaN : Number(text);
  if (Number.isNaN(value) && text !== 'NaN') return undefined;
  return { name, labels, value };
}

/** The samples of a Prometheus text exposition; comments and malformed lines are skipped. */
export function parsePrometheusText(text: string): MetricSample[] {
  const samples: MetricSample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const sample = parseLine(line);
    if (sample) samples.push(sample);
  }
  return samples;
}

/** Every kind's gauge names (engine-kinds.ts): a replica's page is read for whichever kind's it holds. */
const GAUGES = loadGaugeNames();

/**
 * The load gauges of an engine's /metrics page (vLLM's, SGLang's). One server may report several
 * engines or ranks (label engine, tp_rank, dp_rank): request counts are summed, the KV cache is
 * the fullest one's, since that is where the next request may not fit. A gauge absent from the
 * page is absent from the result.
 */
export function engineLoadFrom(text: string): EngineLoad {
  const samples = parsePrometheusText(text).filter((sample) => Number.isFinite(sample.value));
  const first = (names: readonly string[]) => names.map((name) => samples.filter((sample) => sample.name === name)).find((found) => found.length > 0);
  const running = first(GAUGES.running);
  const waiting = first(GAUGES.waiting);
  const kvUsage = first(GAUGES.kvUsage);
  return {
    ...(running ? { running: running.reduce((sum, sample) => sum + sample.value, 0) } : {}),
    ...(waiting ? { waiting: waiting.reduce((sum, sample) => sum + sample.value, 0) } : {}),
    ...(kvUsage ? { kvUsage: Math.max(...kvUsage.map((sample) => sample.value)) } : {}),
  };
}
