// Item 11's section of bench/RESULTS.md: a batching engine kept full, alone and beside live traffic,
// and the fixed-latency scheduler figures (9), each beside the previous build's.
import type { Results, ResultsFormat, Stored } from './results-store.js';
import type { SchedulerResult } from './scheduler.js';

type Format = ResultsFormat;

export function batchingEngineSections(results: Results, format: Format): { summary: string[]; section?: string } {
  const { batching, scheduler, schedulerPrevious, batch, batchPrevious } = results;
  if (!batching) return { summary: [] };
  const { fixed, percent, met, when, data } = format;
  const b = batching.data;
  const summary: string[] = [];
  const lines: string[] = [
    '## 11. Keeping a batching engine full: alone, beside live traffic, and the fixed-latency engine again',
    '',
    when(batching) + ` Median of ${b.rounds} rounds; in every round each side runs back to back on a fresh engine.` +
      (b.previousBuild ? ` "Previous build": ${b.previousCommit ?? b.previousBuild}, run in the same rounds.` : ' No previous build was given (BENCH_PREVIOUS_BUILD).') +
      (b.aloneDate ? ` The batch-alone figures below were measured on ${b.aloneDate}${b.alonePreviousCommit ? `, beside ${b.alonePreviousCommit}` : ''}, and not run again since.` : '') +
      (b.liveDate ? ` The figures beside live traffic were measured on ${b.liveDate}${b.livePreviousCommit ? `, beside ${b.livePreviousCommit}` : ''}, and not run again since.` : ''),
    '',
    'Engine: bench/upstream.ts in its continuous-batching mode, a stand-in for a vLLM server (which cannot run here) stepping its batch as vLLM does, calibrated to a published vLLM benchmark (bench/FINDINGS.md, "A continuous-batching upstream"): ' +
      `chat (\`${b.engines.chat.args.join(' ')}\`, 16 tokens an answer; a step costs 13.2 ms plus about 0.1 ms a running sequence, so a full batch of 64 answers about 5× what a batch of 8 does, each answer about 1.4× slower) and ` +
      `embeddings (\`${b.engines.embeddings.args.join(' ')}\`; each step takes whatever waits, up to 64 inputs). Spool: the embedded default with a FLEET_FILE \`vllm\` replica whose \`concurrency\` (the ceiling) is 1× or 4× the engine's max_num_seqs, its gauges read or not; ` +
      `${b.engines.chat.lines.toLocaleString('en')} chat lines or ${b.engines.embeddings.lines.toLocaleString('en')} embeddings lines, upload to output downloaded with the official client. ` +
      'Bare loop: node:http on kept-alive connections straight to the engine, swept over its concurrency up to the same ceiling (4 s at each after a warm-up); its best is the reference.',
    '',
    'Spool\'s rate is read while the batch runs, from the log (its 20th to 95th percentile line outcome), as the bare loop\'s is read after a warm-up: what the engine is kept at once the limit has found it. End to end (upload to output, the learning included) is shown beside it.',
    '',
    '| engine | ceiling | gauges | best bare loop | this build, running | of the best | end to end | engine batch | previous build, running | of the best | end to end | engine batch | target | |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  // One decimal, cut rather than rounded: these cases sit at their target, and a rounded figure read 95% for a case at 94.998%.
  const nearTarget = (ratio: number) => `${fixed(Math.floor(ratio * 1000) / 10, 1)}%`;
  let worst = Number.POSITIVE_INFINITY;
  for (const entry of b.alone) {
    const sweep = b.sweeps.find((candidate) => candidate.kind === entry.kind && candidate.ceilingTimes === entry.ceilingTimes)!;
    const ratio = entry.ratio.this ?? 0;
    worst = Math.min(worst, ratio);
    const side = (build: 'this' | 'previous') =>
      entry.spool[build] === undefined ? '| n/a | | | ' : `| ${fixed(entry.spool[build]!, 0)} lines/s | ${nearTarget(entry.ratio[build]!)} | ${percent(entry.endToEndRatio?.[build] ?? Number.NaN)} | ${fixed(entry.meanBatch[build]!)} `;
    lines.push(
      `| ${entry.kind} | ${entry.ceilingTimes}× (${entry.ceilingTimes * b.engines[entry.kind].maxNumSeqs}) | ${entry.gauges ? 'read' : 'not read'} | ${fixed(sweep.best, 0)}/s at ${sweep.bestConcurrency} ${side('this')}${side('previous')}| ≥ 95% | ${met(ratio >= 0.95)} |`,
    );
  }
  if (b.alone.length > 0) {
    summary.push(`| 11. A batch alone on a batching engine (chat and embeddings, 1× and 4×, gauges or not; the lowest) | best bare loop of each | ${b.alone.length} cases | ${nearTarget(worst)} | ≥ 95% | ${met(worst >= 0.95)} |`);
    lines.push('', 'The bare loop at each concurrency (requests/s, medians): ' + b.sweeps.map((sweep) => `${sweep.kind} ${sweep.ceilingTimes}×: ${sweep.points.map((point) => `${point.concurrency}→${fixed(point.rate, 0)}`).join(', ')}`).join('; ') + '.');
  }
  if (b.live) {
    const { derivation: d, cases } = b.live;
    lines.push(
      '',
      `**Beside live traffic.** Interactive chat requests (16 tokens) arrive at random, 8 a second, at /compat/v1 while a 12,000-line batch runs (ceiling 4×, 256), measured over 320 of them once 1,500 lines are done` +
        (cases.some((entry) => entry.warmUpP99Ms !== undefined)
          ? '; they arrive from the batch\'s start, and their p99 during those first 1,500 lines (the objective finding its cap from an engine the batch had filled) is shown apart. '
          : ' (in this run interactive traffic began only then: the window held the objective finding its cap from an engine the batch had filled alone). ') +
        `The objective (INTERACTIVE_P99_MS) is ${fixed(d.objectiveMs, 0)} ms: 1.3 × the interactive p99 this build gives with nothing else on the engine (${fixed(d.measuredAloneP99Ms, 0)} ms). ` +
        `What the engine can give the batch at that objective, derived from its model (bench/engine-capacity-derivation.ts, simulated time, the same step costs and max_num_seqs): alone, the model answers interactive requests in ${fixed(d.modelAloneP99Ms, 0)} ms at the p99, so Spool and HTTP add ${fixed(d.overheadMs, 0)} ms; ` +
        `for each batch concurrency n the model gives the interactive p99 and the batch's answers per second, and the largest batch throughput whose p99 plus that overhead meets the objective is ${fixed(d.capacity, 1)} lines/s, at n = ${d.capacityConcurrency} ` +
        `(with no interactive traffic and a full batch: ${fixed(d.fullBatchPerSecond, 1)}/s). Model points (n: p99 ms, batch/s): ${d.points.filter((point) => point.concurrency % 8 === 0 || point.concurrency === d.capacityConcurrency).map((point) => `${point.concurrency}: ${fixed(point.interactiveP99Ms, 0)}, ${fixed(point.batchPerSecond, 0)}`).join('; ')}.`,
      '',
      '| gauges | build | interactive p99 | within the objective | batch lines/s | of what the engine can give at the objective | batch concurrency chosen | warm-up p99 | target | |',
      '|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const entry of cases) {
      const share = d.capacity > 0 ? entry.batchLinesPerSecond / d.capacity : 0;
      const ok = entry.interactiveP99Ms <= d.objectiveMs && share >= 0.9;
      lines.push(
        `| ${entry.gauges ? 'read' : 'not read'} | ${entry.build} | ${fixed(entry.interactiveP99Ms, 0)} ms | ${entry.interactiveP99Ms <= d.objectiveMs ? 'yes' : 'no'} | ${fixed(entry.batchLinesPerSecond, 1)} | ${percent(share)} | ${entry.batchConcurrency === undefined ? 'n/a' : fixed(entry.batchConcurrency, 0)} | ${entry.warmUpP99Ms === undefined ? 'n/a' : `${fixed(entry.warmUpP99Ms, 0)} ms`} | p99 ≤ ${fixed(d.objectiveMs, 0)} ms, ≥ 90% | ${entry.build === 'this' ? met(ok) : ''} |`,
      );
    }
    const ours = cases.filter((entry) => entry.build === 'this');
    if (ours.length > 0) {
      const lowest = Math.min(...ours.map((entry) => entry.batchLinesPerSecond / d.capacity));
      const highestP99 = Math.max(...ours.map((entry) => entry.interactiveP99Ms));
      summary.push(`| 11. Beside live traffic, objective ${fixed(d.objectiveMs, 0)} ms (gauges or not; the worse) | engine's capacity at it ${fixed(d.capacity, 1)} lines/s | p99 ${fixed(highestP99, 0)} ms | ${percent(lowest)} | p99 within, ≥ 90% | ${met(highestP99 <= d.objectiveMs && lowest >= 0.9)} |`);
    }
  }
  if (scheduler && schedulerPrevious) {
    const row = (name: string, run: SchedulerResult, stored: Stored<SchedulerResult>) =>
      `| ${name} (${stored.date}) | ${run.interactive.map((entry) => `${fixed(entry.p99Ratio, 2)}×`).join(' / ')} | ${run.interactive.map((entry) => percent(entry.batchShare)).join(' / ')} | ${run.deadlines.linesMissed} | ${fixed(run.fairness.jain, 2)} | ${run.alone.map((entry) => percent(entry.ratio)).join(' / ')} |`;
    lines.push(
      '',
      '**The fixed-latency engine (9), this build and the previous one.** The scheduler benchmark of section 9 on the embedded default (32 slots, 100 ms, fcfs: no priority hints), run on each build: ENGINE_CONCURRENCY 32 and 128 (4× the slots) for the interactive p99 beside a batch (target ≤ 1.25× alone) and the batch\'s share of the idle capacity (≥ 90%), deadlines, fairness, and a batch alone at 32 and 512.',
      '',
      '| build | interactive p99 ÷ alone (32 / 128) | batch share (32 / 128) | lines missed | Jain | batch alone (32 / 512) |',
      '|---|---|---|---|---|---|',
      row('this build', scheduler.data, scheduler),
      row('previous build', schedulerPrevious.data, schedulerPrevious),
      '',
      data('schedulerPrevious', schedulerPrevious),
    );
    const fourTimes = scheduler.data.interactive.find((entry) => entry.engineConcurrency === 128);
    if (fourTimes) summary.push(`| 11. Fixed latency, 4× the slots, no priority hints: interactive p99 beside a batch | previous build ${fixed(schedulerPrevious.data.interactive.find((entry) => entry.engineConcurrency === 128)?.p99Ratio ?? Number.NaN, 2)}× | ${fixed(fourTimes.p99Ratio, 2)}× | | ≤ 1.25× | ${met(fourTimes.p99Ratio <= 1.25)} |`);
  }
  if (batch && batchPrevious) {
    const row = (name: string, stored: typeof batch) =>
      `| ${name} (${stored.date}) | ${fixed(stored.data.baselineLinesPerSecond, 0)} requests/s | ${fixed(stored.data.spoolLinesPerSecond, 0)} lines/s | ${percent(stored.data.ratio)} | ${fixed(stored.data.spoolInFlight)} | ${fixed(stored.data.spoolPeakRssMiB, 0)} MiB |`;
    lines.push(
      '',
      '**Item 1 (a 50,000-line batch on the fixed-latency engine, 100 ms, 128 slots), this build and the previous one.**',
      '',
      '| build | bare loop | spool | spool / bare | requests in service at the upstream | peak RSS |',
      '|---|---|---|---|---|---|',
      row('this build', batch),
      row('previous build', batchPrevious),
      '',
      data('batchPrevious', batchPrevious),
    );
  }
  lines.push('', data('batching', batching));
  return { summary, section: lines.join('\n') };
}
