// How much of what an engine's prefix cache could save a batch's line order lets it save: a
// shuffled batch whose lines share a few long system prompts, against the upstream simulator with
// a prefix cache too small to hold them all (bench/upstream.ts, bench/prefix-cache.ts). Spool runs
// it twice in every round, side by side: lines in file order (BATCH_PREFIX_ORDER=off) and in the
// order it chooses (BATCH_PREFIX_ORDER=auto, the default).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BENCH_MODEL, benchJobEnv, spoolBatchOnEmbedded, startUpstream, writeBatchInput } from './batch.js';
import { median } from './measurements.js';
import { BLOCK_TOKENS, CHARS_PER_TOKEN, CacheableTokens, blockIds, promptText, promptTokens } from './prefix-cache.js';

const PROMPTS = 64;
/**
 * Each system prompt's content. Rendered with its role ("system\n…\n") it is 3,912 characters:
 * 61 full blocks (976 tokens) shared by every line that has it, and the rest of its last block
 * goes with the line's own message. About 1,000 tokens a line, and a 50,000-line input stays
 * under the 200 MiB a batch input file may have.
 */
const PROMPT_CHARS = 3_904;
const SHARED_BLOCKS = Math.floor((PROMPT_CHARS + 'system\n\n'.length) / (BLOCK_TOKENS * CHARS_PER_TOKEN));
/** The cache holds 16 prompts' shared blocks (15,616 tokens) and 24 blocks of the lines' own messages: 16,000 tokens. */
const CACHED_PROMPTS = 16;
const CACHE_TOKENS = (CACHED_PROMPTS * SHARED_BLOCKS + 24) * BLOCK_TOKENS;
/**
 * A prompt's full prefill (976 shared tokens, 50 µs each) takes about half the fixed latency: long
 * prompts and short answers, where the prefill is what a cache saves, and a gap in time well above
 * this machine's noise.
 */
const LATENCY_MS = 100;
const PREFILL_US_PER_TOKEN = 50;
const CONCURRENCY = 128;
const SEED = 14;
const MAX_BATCH_INPUT_BYTES = 200 * 1024 * 1024;

const ORDERS = { fileOrder: 'off', prefixOrder: 'auto' } as const;

export interface PrefixOrderRun {
  /** Upload started to output downloaded. */
  seconds: number;
  /** From BatchValidated to the last line's outcome. */
  runSeconds: number;
  cachedTokens: number;
  /** cachedTokens over the most any order could have cached. */
  cachedShare: number;
  /** Mean requests in service at the upstream. */
  inFlight: number;
  peakRssMiB: number;
}

export interface PrefixResult {
  rounds: number;
  lines: number;
  inputMiB: number;
  prompts: number;
  sharedTokensPerPrompt: number;
  cacheTokens: number;
  cachedPrompts: number;
  latencyMs: number;
  prefillUsPerToken: number;
  concurrency: number;
  /** Approximate prompt tokens of the whole batch. */
  promptTokens: number;
  /** What an unbounded cache would hold for the batch, in any order. */
  maxCachedTokens: number;
  /** Medians over the rounds. */
  fileOrder: PrefixOrderRun;
  prefixOrder: PrefixOrderRun;
  /** Median of the rounds' prefix-order seconds over file-order seconds. */
  timeRatio: number;
}

/** A small seeded generator (mulberry32): the same batch in every run. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const WORDS = (
  'answer briefly and precisely cite the policy when asked never invent facts keep the customer informed about delivery refunds ' +
  'warranty invoices accounts passwords shipping returns exchanges discounts loyalty points billing cycles contracts renewals ' +
  'escalate to a human agent if the request involves legal medical or financial advice use plain language avoid jargon ' +
  'summarise the conversation before closing confirm the order number check the address verify the identity of the caller'
).split(' ');

/** The system prompts: each its own from its first block on (its number leads), then seeded words. */
function systemPrompts(next: () => number): string[] {
  return Array.from({ length: PROMPTS }, (_, index) => {
    let text = `You are assistant ${index + 1} of ${PROMPTS}.`;
    while (text.length < PROMPT_CHARS) text += ` ${WORDS[Math.floor(next() * WORDS.length)]}`;
    return text.slice(0, PROMPT_CHARS);
  });
}

/** Which prompt each line has: every prompt equally often, shuffled (Fisher–Yates). */
function shuffledAssignment(lines: number, next: () => number): number[] {
  const assignment = Array.from({ length: lines }, (_, index) => index % PROMPTS);
  for (let index = lines - 1; index > 0; index--) {
    const other = Math.floor(next() * (index + 1));
    [assignment[index], assignment[other]] = [assignment[other]!, assignment[index]!];
  }
  return assignment;
}

function* prefixRequests(lines: number): Generator<{ custom_id: string; body: unknown }> {
  const next = random(SEED);
  const prompts = systemPrompts(next);
  const assignment = shuffledAssignment(lines, next);
  for (let index = 0; index < lines; index++) {
    yield {
      custom_id: `request-${index}`,
      body: {
        model: BENCH_MODEL,
        messages: [
          { role: 'system', content: prompts[assignment[index]!] },
          { role: 'user', content: `Line ${index}: in one sentence, say something true about the number ${index}.` },
        ],
        max_tokens: 16,
      },
    };
  }
}

/** The batch's prompt tokens and the most any order could find cached, by the upstream's own block model. */
function promptTotals(lines: number): { promptTokens: number; maxCachedTokens: number } {
  const cacheable = new CacheableTokens();
  let tokens = 0;
  for (const { body } of prefixRequests(lines)) {
    const text = promptText(body);
    tokens += promptTokens(text);
    cacheable.add(blockIds(text));
  }
  return { promptTokens: tokens, maxCachedTokens: cacheable.total };
}

export async function benchPrefix(options: { lines: number; rounds: number }): Promise<PrefixResult> {
  const work = mkdtempSync(join(tmpdir(), 'spool-bench-prefix-'));
  try {
    const input = join(work, 'input.jsonl');
    const size = await writeBatchInput(input, prefixRequests(options.lines));
    if (size > MAX_BATCH_INPUT_BYTES) throw new Error(`the input is ${size} bytes, more than a batch input file may have`);
    const totals = promptTotals(options.lines);
    const runs: Record<keyof typeof ORDERS, PrefixOrderRun[]> = { fileOrder: [], prefixOrder: [] };
    const ratios: number[] = [];
    for (let round = 0; round < options.rounds; round++) {
      // Alternate which goes first, so a drift on the machine does not always favour the same one.
      const names = (round % 2 === 0 ? ['fileOrder', 'prefixOrder'] : ['prefixOrder', 'fileOrder']) as Array<keyof typeof ORDERS>;
      const seconds: Partial<Record<keyof typeof ORDERS, number>> = {};
      for (const name of names) {
        const upstream = await startUpstream(LATENCY_MS, CONCURRENCY, 'fcfs', { cacheTokens: CACHE_TOKENS, prefillUsPerToken: PREFILL_US_PER_TOKEN });
        const dataDir = mkdtempSync(join(work, 'data-'));
        try {
          const env = { ...benchJobEnv(work, upstream.url, CONCURRENCY), BATCH_PREFIX_ORDER: ORDERS[name] };
          const run = await spoolBatchOnEmbedded(dataDir, env, input, options.lines);
          const stats = await upstream.stats();
          if (stats.served !== options.lines) throw new Error(`the upstream served ${stats.served} requests, not ${options.lines}`);
          if (stats.promptTokens !== totals.promptTokens) throw new Error(`the upstream counted ${stats.promptTokens} prompt tokens, the input has ${totals.promptTokens}`);
          const cachedTokens = stats.cachedTokens ?? 0;
          runs[name].push({
            seconds: run.seconds,
            runSeconds: run.phases.run,
            cachedTokens,
            cachedShare: cachedTokens / totals.maxCachedTokens,
            inFlight: stats.meanActive,
            peakRssMiB: run.peakRssMiB,
          });
          seconds[name] = run.seconds;
          process.stdout.write(
            `prefix ${options.lines} lines, BATCH_PREFIX_ORDER=${ORDERS[name]}: ${run.seconds.toFixed(1)} s (running the lines ${run.phases.run.toFixed(1)} s), ` +
              `${((100 * cachedTokens) / totals.maxCachedTokens).toFixed(1)}% of the cacheable tokens cached, ${stats.meanActive.toFixed(1)} in service\n`,
          );
        } finally {
          rmSync(dataDir, { recursive: true, force: true });
          await upstream.stop();
        }
      }
      ratios.push(seconds.prefixOrder! / seconds.fileOrder!);
    }
    const medianRun = (rows: PrefixOrderRun[]): PrefixOrderRun => ({
      seconds: median(rows.map((row) => row.seconds)),
      runSeconds: median(rows.map((row) => row.runSeconds)),
      cachedTokens: median(rows.map((row) => row.cachedTokens)),
      cachedShare: median(rows.map((row) => row.cachedShare)),
      inFlight: median(rows.map((row) => row.inFlight)),
      peakRssMiB: median(rows.map((row) => row.peakRssMiB)),
    });
    return {
      rounds: options.rounds,
      lines: options.lines,
      inputMiB: size / (1024 * 1024),
      prompts: PROMPTS,
      sharedTokensPerPrompt: SHARED_BLOCKS * BLOCK_TOKENS,
      cacheTokens: CACHE_TOKENS,
      cachedPrompts: CACHED_PROMPTS,
      latencyMs: LATENCY_MS,
      prefillUsPerToken: PREFILL_US_PER_TOKEN,
      concurrency: CONCURRENCY,
      ...totals,
      fileOrder: medianRun(runs.fileOrder),
      prefixOrder: medianRun(runs.prefixOrder),
      timeRatio: median(ratios),
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
