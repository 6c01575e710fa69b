// Items 12 and 13's sections of bench/RESULTS.md: many small batches at once, and a service's
// speed as it ages, each beside the previous build's.
import { byThreadKind, median, threadFigures } from './measurements.js';
import type { Results, ResultsFormat, Stored } from './results-store.js';
import type { HistoryRun, SmallBatchesRound } from './small-batches.js';

type Format = ResultsFormat;

/** Targets (issue: throughput at scale). */
const BATCHES_PER_SECOND = 50;
const OF_ONE_BATCH = 0.5;
const HISTORY_WITHIN = 0.1;

export function smallBatchesSections(results: Results, format: Format): { summary: string[]; sections: string[] } {
  const { fixed, percent, met, when, data } = format;
  const summary: string[] = [];
  const sections: string[] = [];
  if (results.smallBatches) {
    const s = results.smallBatches.data;
    const medians = (rounds: SmallBatchesRound[]) => ({
      batchesPerSecond: median(rounds.map((round) => round.small.batchesPerSecond)),
      linesPerSecond: median(rounds.map((round) => round.small.linesPerSecond)),
      largeLinesPerSecond: median(rounds.map((round) => round.largeLinesPerSecond)),
      ratio: median(rounds.map((round) => round.ratio)),
      seconds: median(rounds.map((round) => round.small.seconds)),
      createdToEnded: median(rounds.map((round) => round.small.createdToEnded)),
      validatedToEnded: median(rounds.map((round) => round.small.validatedToEnded)),
      maxCreatedToEnded: median(rounds.map((round) => round.small.maxCreatedToEnded)),
      cpu: median(rounds.map((round) => round.small.cpuMsPerThousandLines)),
    });
    const row = (name: string, rounds: SmallBatchesRound[] | undefined, ours: boolean) => {
      if (!rounds || rounds.length === 0) return `| ${name} | n/a | | | | | | | | |`;
      const m = medians(rounds);
      const ok = m.batchesPerSecond >= BATCHES_PER_SECOND && m.ratio >= OF_ONE_BATCH;
      return `| ${name} | ${fixed(m.seconds)} s | ${fixed(m.batchesPerSecond)} | ${fixed(m.linesPerSecond, 0)} | ${fixed(m.largeLinesPerSecond, 0)} | ${percent(m.ratio)} | ${fixed(m.createdToEnded)} s (max ${fixed(m.maxCreatedToEnded)} s) | ${fixed(m.validatedToEnded)} s | ${fixed(m.cpu, 0)} ms | ${ours ? met(ok) : ''} |`;
    };
    const ours = medians(s.thisBuild);
    summary.push(
      `| 12. Many small batches: ${s.batches.toLocaleString('en')} × ${s.lines} lines created at once | one batch of all their lines ${fixed(ours.largeLinesPerSecond, 0)} lines/s | ${fixed(ours.batchesPerSecond)} batches/s, ${fixed(ours.linesPerSecond, 0)} lines/s | ${percent(ours.ratio)} | ≥ ${BATCHES_PER_SECOND} batches/s, ≥ ${percent(OF_ONE_BATCH)} | ${met(ours.batchesPerSecond >= BATCHES_PER_SECOND && ours.ratio >= OF_ONE_BATCH)} |`,
    );
    sections.push(
      [
        `## 12. Many small batches: ${s.batches.toLocaleString('en')} batches of ${s.lines} lines created at once`,
        '',
        when(results.smallBatches) + ` Median of ${s.rounds} rounds; in each, this build and the previous one (where BENCH_PREVIOUS_BUILD names one) run one after the other, taking turns at going first (since 2026-12-01).`,
        '',
        `The embedded default against the upstream of item 2 (it answers at once, at most 64 requests in service; ENGINE_CONCURRENCY=64), as an eval harness uses Spool: every input file uploaded first (not timed), then all ${s.batches.toLocaleString('en')} batches created at once (${64} creations in flight), and the wave timed from the first BatchCreated to the last batch ended, from the log. ` +
          `Beside it, one batch of all their lines (${(s.batches * s.lines).toLocaleString('en')}) on a fresh service against the same upstream, created to completed. CPU: Spool's process (user + system, every thread) over the wave, per 1,000 lines. Every batch checked to have completed every line.`,
        '',
        '| build | wave | batches/s | lines/s | one batch, lines/s | small of one | created → ended (median) | validated → ended (median) | CPU per 1,000 lines | target ≥ 50/s and ≥ 50% |',
        '|---|---|---|---|---|---|---|---|---|---|',
        row('this build', s.thisBuild, true),
        row('previous build', s.previousBuild, false),
        '',
        ...waveByThread([
          ['this build', s.thisBuild],
          ['previous build', s.previousBuild],
        ]),
        data('smallBatches', results.smallBatches),
      ].join('\n'),
    );
  }
  if (results.history) {
    const h = results.history.data;
    const trend = (first: number | undefined, last: number | undefined, digits: number, unit: string) =>
      first === undefined || last === undefined ? 'n/a' : `${fixed(first, digits)} → ${fixed(last, digits)}${unit} (${percent(last / first)})`;
    const row = (name: string, run: HistoryRun | undefined, ours: boolean) =>
      run
        ? `| ${name} | ${fixed(run.firstTenthLinesPerSecond, 0)} | ${fixed(run.lastTenthLinesPerSecond, 0)} | ${percent(run.ratio)} | ${trend(run.firstTenthCpuMsPerThousandLines, run.lastTenthCpuMsPerThousandLines, 0, ' ms')} | ${trend(run.firstTenthWrittenKiBPerLine, run.lastTenthWrittenKiBPerLine, 1, ' KiB')} | ${fixed(run.firstTenthRssMiB, 0)} → ${fixed(run.lastTenthRssMiB, 0)} MiB | ${fixed(run.peakRssMiB, 0)} MiB | ${ours ? met(historyMet(run)) : ''} |`
        : `| ${name} | n/a | | | | | | | |`;
    const total = h.waves * h.batchesPerWave * h.lines;
    summary.push(
      `| 13. History: ${total.toLocaleString('en')} lines through ${(h.waves * h.batchesPerWave).toLocaleString('en')} batches on one service | first tenth ${fixed(h.thisBuild.firstTenthLinesPerSecond, 0)} lines/s | last tenth ${fixed(h.thisBuild.lastTenthLinesPerSecond, 0)} lines/s | ${percent(h.thisBuild.ratio)}, RSS ${fixed(h.thisBuild.firstTenthRssMiB, 0)} → ${fixed(h.thisBuild.lastTenthRssMiB, 0)} MiB | ≥ ${percent(1 - HISTORY_WITHIN)}, RSS within ${percent(HISTORY_WITHIN)} | ${met(historyMet(h.thisBuild))} |`,
    );
    const curve = (run: HistoryRun) => run.waves.filter((_, index) => index % Math.max(1, Math.round(run.waves.length / 10)) === 0).map((wave) => fixed(wave.linesPerSecond, 0)).join(', ');
    sections.push(
      [
        `## 13. A service as it ages: ${total.toLocaleString('en')} lines through ${(h.waves * h.batchesPerWave).toLocaleString('en')} batches`,
        '',
        when(results.history) +
          ` One service on the embedded default against the upstream of item 2, fed ${h.waves} waves of ${h.batchesPerWave} batches × ${h.lines} lines, the same work each wave (as item 12: uploaded first, created at once, timed from the log). ` +
          'The figure is the median lines/s of the last tenth of the waves against the first tenth; RSS is read after each wave. ' +
          'Beside it, the service\'s CPU per 1,000 lines and what it handed to write calls per line (its log\'s and read models\' pages, its files, its sockets), first tenth → last tenth: a busy machine blurs these less than lines/s, and a step that grows with history shows in them. ' +
          (h.alternated ? 'Both builds\' services ran side by side from the start, fed a wave each in turn (this, previous, previous, this, …), so a slow stretch of the machine slows both. ' : 'The builds ran one after the other. ') +
          'The benchmark learns that a wave has ended from the log\'s tail past the wave\'s start (until a change of 2026-11-28 it counted over the whole log every 100 ms, a scan that grew with history and took the cores the service ran on).',
        '',
        '| build | first tenth, lines/s | last tenth, lines/s | last / first | CPU per 1,000 lines (first → last tenth) | written per line (first → last tenth) | RSS (first → last tenth) | peak RSS | target: not slower by more than 10%, RSS within 10% |',
        '|---|---|---|---|---|---|---|---|---|',
        row('this build', h.thisBuild, true),
        row('previous build', h.previousBuild, false),
        '',
        `Lines/s every tenth of the way, this build: ${curve(h.thisBuild)}` + (h.previousBuild ? `; previous build: ${curve(h.previousBuild)}.` : '.'),
        '',
        data('history', results.history),
      ].join('\n'),
    );
  }
  return { summary, sections };
}

/** Not slower by more than HISTORY_WITHIN, and RSS flat: the last tenth's within HISTORY_WITHIN of the first tenth's. */
function historyMet(run: HistoryRun): boolean {
  return run.ratio >= 1 - HISTORY_WITHIN && run.lastTenthRssMiB <= (1 + HISTORY_WITHIN) * run.firstTenthRssMiB;
}

/** The wave's CPU by kind of thread, medians of the rounds that measured it (since 2026-12-01). */
function waveByThread(builds: Array<[string, SmallBatchesRound[] | undefined]>): string[] {
  const sentences = builds.flatMap(([name, rounds]) => {
    const measured = (rounds ?? []).map((round) => round.small.cpuByThread).filter((threads) => threads !== undefined);
    if (measured.length === 0) return [];
    return [`${name}: ${threadFigures(byThreadKind((kind) => median(measured.map((threads) => threads[kind]))))}`];
  });
  return sentences.length === 0 ? [] : [`**The wave's CPU by thread** (medians of the rounds, ms per 1,000 lines): ${sentences.join('; ')}.`, ''];
}
