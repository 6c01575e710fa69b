// The fleet scheduler's section of RESULTS.md: the figures from before it was wired beside the
// latest run's, scenario by scenario.
import type { ResultsFormat, Stored } from './results-store.js';
import { SCHEDULER_SIZES, type SchedulerResult, type Spread } from './scheduler.js';

type Format = ResultsFormat;

const spread = (value: Spread | undefined) => (value ? `${value.median} (${value.min}–${value.max})` : 'not recorded');

const TARGETS = { p99Ratio: 1.25, batchShare: 0.9, tightRatio: 2, jain: 0.95, alone: 0.95 };

export function schedulerSections(
  shape: SchedulerResult['shape'],
  before: Stored<SchedulerResult> | undefined,
  after: Stored<SchedulerResult> | undefined,
  format: Format,
): { summary: string[]; section?: string } {
  if (!before && !after) return { summary: [] };
  const { fixed, percent, met, when, data } = format;
  const runs = [before && { label: 'before the scheduler', stored: before }, after && { label: 'latest run', stored: after }].filter((run) => run !== undefined);
  const latest = runs[runs.length - 1]!;
  const title = shape === 'embedded' ? 'embedded' : 'Kafka, processes';
  const ms = (value: number) => `${fixed(value, 0)} ms`;
  const lines: string[] = [];
  const s = SCHEDULER_SIZES;
  const d = latest.stored.data;

  lines.push(`## 9${shape === 'kafka' ? 'b' : ''}. The fleet scheduler (${title}): interactive latency, deadlines and fairness beside a large batch`, '');
  for (const run of runs) lines.push(`${run.label[0]!.toUpperCase()}${run.label.slice(1)}: ${when(run.stored)} One round (${fixed(run.stored.data.seconds / 60)} minutes).`);
  if (!after) lines.push('', '**These figures are from before the fleet scheduler was wired** (first come, first served per replica). The rerun after wiring adds its own column beside them.');
  lines.push(
    '',
    `Upstream: bench/upstream.ts, ${d.slots} slots, ${d.latencyMs} ms a request (capacity ${d.capacity} requests/s), policy \`${d.policy}\`` +
      (d.policy === 'priority' ? " (queued requests served by the body's `priority` field, lower first, as vLLM's priority scheduling)" : '') +
      '; a fresh upstream and a fresh ' +
      (shape === 'kafka' ? 'deployment (broker, API, relay, validator, finalizer and two inference processors as processes; ENGINE_CONCURRENCY split between the inference processors, the API holding all of it for /compat/v1; after the scheduler the engine is a FLEET_FILE `vllm` replica with `priority_hints`, so Spool sends each request\'s urgency)' : 'service on the embedded default') +
      ' for each scenario. Sizes are scaled down from the issue\'s where the time allows: ' +
      `interactive load ${s.interactiveRequests} requests at ${s.interactiveRate} requests/s (open loop, /compat/v1 chat), beside a ${s.loadBatchLines.toLocaleString('en')}-line batch measured once it runs steadily and cancelled after; ` +
      `deadlines with the issue's sizes (the 1-minute SLA cannot be scaled): ${s.deadline.loose.toLocaleString('en')} lines on a ${s.deadlineSlas.loose} job, ${s.deadline.medium.toLocaleString('en')} on ${s.deadlineSlas.medium}, ${s.deadline.tight} on ${s.deadlineSlas.tight}, created in that order, back to back (about ${fixed((s.deadline.loose + s.deadline.medium + s.deadline.tight) / d.capacity, 0)} s of capacity in all; the loose batch is cancelled once the other two have ended); ` +
      `fairness with ${s.fairness.big.toLocaleString('en')} and ${s.fairness.small} lines on two 24h jobs, the large one created first, measured from the second creation until either has no line left. Line times come from the log's LineCompleted events.`,
    '',
  );

  const header = (columns: string[]) => [`| ${columns.join(' | ')} |`, `|${columns.map(() => '---').join('|')}|`];
  lines.push(...header(['run', 'ENGINE_CONCURRENCY', 'interactive alone p50 / p99', 'beside the batch p50 / p99', 'p99 ratio (target ≤ 1.25)', 'batch lines/s meanwhile', 'of the capacity left idle (target ≥ 90%)', 'learned limit / batch concurrency (median, min–max)']));
  for (const run of runs) {
    for (const row of run.stored.data.interactive) {
      lines.push(
        `| ${run.label} | ${row.engineConcurrency} | ${ms(row.alone.p50)} / ${ms(row.alone.p99)} | ${ms(row.underBatch.p50)} / ${ms(row.underBatch.p99)} | ${fixed(row.p99Ratio, 2)}× ${met(row.p99Ratio <= TARGETS.p99Ratio)} | ${fixed(row.batchLinesPerSecond, 0)}${row.batchRanThroughout ? '' : ' (the batch ended inside the window)'} | ${percent(row.batchShare)} of ${fixed(row.idleCapacity, 0)} ${met(row.batchShare >= TARGETS.batchShare)} | ${spread(row.learnedLimit)} / ${spread(row.batchConcurrency)} |`,
      );
    }
  }
  lines.push('');
  lines.push(...header(['run', 'batch', 'status', 'completed by its deadline', 'completed late', 'not completed']));
  for (const run of runs) {
    for (const row of run.stored.data.deadlines.batches) {
      lines.push(`| ${run.label} | ${row.lines.toLocaleString('en')} lines, SLA ${row.sla} | ${row.status}${row.name === 'loose' && row.status === 'cancelled' ? ' by the benchmark' : ''} | ${row.completedByDeadline.toLocaleString('en')} | ${row.completedLate} | ${row.name === 'loose' ? 'n/a' : row.notCompleted.toLocaleString('en')} |`);
    }
  }
  lines.push('');
  lines.push(...header(['run', 'lines of the 1m and 10m batches missing their deadline (target 0)', `the ${s.deadline.tight}-line 1m batch alone`, 'behind the others', 'ratio (target ≤ 2×)']));
  for (const run of runs) {
    const row = run.stored.data.deadlines;
    const mixed = row.tightMixedSeconds === null ? `did not complete (${row.tightMixedCompleted} of ${s.deadline.tight} lines)` : `${fixed(row.tightMixedSeconds)} s`;
    const ratio = row.tightMixedSeconds === null ? `> ${fixed(60 / row.tightAloneSeconds, 0)}×` : `${fixed(row.tightMixedSeconds / row.tightAloneSeconds)}×`;
    lines.push(`| ${run.label} | ${row.linesMissed.toLocaleString('en')} ${met(row.linesMissed === 0)} | ${fixed(row.tightAloneSeconds)} s | ${mixed} | ${ratio} ${met(row.tightMixedSeconds !== null && row.tightMixedSeconds <= TARGETS.tightRatio * row.tightAloneSeconds)} |`);
  }
  lines.push('');
  lines.push(...header(['run', 'while both ran', `${s.fairness.big.toLocaleString('en')}-line job`, `${s.fairness.small}-line job`, "small job's share", "Jain's index (target ≥ 0.95)"]));
  for (const run of runs) {
    const row = run.stored.data.fairness;
    lines.push(`| ${run.label} | ${fixed(row.windowSeconds)} s | ${fixed(row.bigPerSecond, 0)} lines/s | ${fixed(row.smallPerSecond, 0)} lines/s | ${percent(row.smallShare)} | ${fixed(row.jain, 2)} ${met(row.jain >= TARGETS.jain)} |`);
  }
  if (runs.some((run) => run.stored.data.alone.length > 0)) {
    lines.push('', `A batch alone (${s.aloneLines.toLocaleString('en')} lines; the median of the rounds' ratios) against the bare loop at ${d.slots} in flight, as in 1; ENGINE_CONCURRENCY ${s.untoldConcurrency} is the case where Spool is not told the engine's slots.`, '');
    lines.push(...header(['run', 'ENGINE_CONCURRENCY', 'rounds', 'bare loop', 'spool', 'spool / bare (target ≥ 95%)']));
    for (const run of runs) {
      for (const row of run.stored.data.alone) lines.push(`| ${run.label} | ${row.engineConcurrency} | ${row.rounds ?? 1} | ${fixed(row.bareLinesPerSecond, 0)} requests/s | ${fixed(row.spoolLinesPerSecond, 0)} lines/s | ${percent(row.ratio)} ${met(row.ratio >= TARGETS.alone)} |`);
    }
  }
  lines.push('');
  const name = shape === 'embedded' ? 'scheduler' : 'schedulerKafka';
  if (before) lines.push(data(`${name}Before`, before));
  if (after) lines.push(data(name, after));

  const worst = d.interactive.reduce((a, b) => (b.p99Ratio > a.p99Ratio ? b : a));
  const summary = [
    `| 9${shape === 'kafka' ? 'b' : ''}. Interactive p99 beside a batch (${title}, ${latest.label}) | ${ms(worst.alone.p99)} alone | ${ms(worst.underBatch.p99)} (ENGINE_CONCURRENCY=${worst.engineConcurrency}) | ${fixed(worst.p99Ratio, 2)}× | ≤ 1.25× | ${met(d.interactive.every((row) => row.p99Ratio <= TARGETS.p99Ratio && row.batchShare >= TARGETS.batchShare))} |`,
    `| 9${shape === 'kafka' ? 'b' : ''}. Deadlines and fairness (${title}, ${latest.label}) | tight batch alone ${fixed(d.deadlines.tightAloneSeconds)} s | ${d.deadlines.linesMissed} lines missed; Jain ${fixed(d.fairness.jain, 2)} | | 0 missed, ≥ 0.95 | ${met(d.deadlines.linesMissed === 0 && d.fairness.jain >= TARGETS.jain)} |`,
  ];
  if (d.alone.length > 0) {
    const told = d.alone.find((row) => row.engineConcurrency === d.slots) ?? d.alone[0]!;
    const untold = d.alone.find((row) => row.engineConcurrency !== d.slots);
    summary.push(
      `| 9. A batch alone (${title}, ${latest.label}) | ${fixed(told.bareLinesPerSecond, 0)} requests/s | ${fixed(told.spoolLinesPerSecond, 0)} lines/s (ENGINE_CONCURRENCY=${told.engineConcurrency})${untold ? `, ${fixed(untold.spoolLinesPerSecond, 0)} lines/s (${untold.engineConcurrency}, slots untold)` : ''} | ${d.alone.map((row) => percent(row.ratio)).join(' / ')} | ≥ 95% | ${met(d.alone.every((row) => row.ratio >= TARGETS.alone))} |`,
    );
  }
  return { summary, section: lines.join('\n') };
}
