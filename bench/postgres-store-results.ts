// Item 14's section of bench/RESULTS.md: the PostgreSQL event store against bare SQL on the same database.
import type { Results, ResultsFormat } from './results-store.js';

/** Targets (issue: a production event store that runs and is tested). */
const APPENDS_OF_BARE = 0.7;
const CATCH_UP_OF_BARE = 0.8;
const LAG_P99_MS = 20;
const KAFKA_SHAPE_OF_BARE = 0.96;

export function postgresStoreSections(results: Results, format: ResultsFormat): { summary: string[]; sections: string[] } {
  const { fixed, percent, met, when, data } = format;
  if (!results.postgres) return { summary: [], sections: [] };
  const p = results.postgres.data;
  const k = results.kafkaPostgres;
  const sqlite = results.kafka;
  const summary = [
    ...p.appends.map(
      (row) =>
        `| 14. PostgreSQL event store: appends, ${row.writers} writer${row.writers === 1 ? '' : 's'} | bare INSERTs ${fixed(row.bare, 0)}/s | ${fixed(row.adapter, 0)} events/s | ${percent(row.ratio)} | ≥ ${percent(APPENDS_OF_BARE)} | ${met(row.ratio >= APPENDS_OF_BARE)} |`,
    ),
    `| 14. PostgreSQL event store: catch-up of ${p.catchUp.events.toLocaleString('en')} events | bare keyset SELECT ${fixed(p.catchUp.bare, 0)}/s | ${fixed(p.catchUp.adapter, 0)} events/s | ${percent(p.catchUp.ratio)} | ≥ ${percent(CATCH_UP_OF_BARE)} | ${met(p.catchUp.ratio >= CATCH_UP_OF_BARE)} |`,
    `| 14. PostgreSQL event store: lag to another process at ${p.lag.ratePerSecond.toLocaleString('en')} appends/s | | p50 ${fixed(p.lag.p50Ms, 0)} ms, p99 ${fixed(p.lag.p99Ms, 0)} ms | | p99 ≤ ${LAG_P99_MS} ms | ${met(p.lag.p99Ms <= LAG_P99_MS)} |`,
    ...(k
      ? [`| 14. The Kafka shape (1b) on PostgreSQL: ${k.data.lines.toLocaleString('en')} lines, ${k.data.latencyMs} ms upstream | ${fixed(k.data.baselineLinesPerSecond, 0)} requests/s | ${fixed(k.data.spoolLinesPerSecond, 0)} lines/s | ${percent(k.data.ratio)} | ≥ ${percent(KAFKA_SHAPE_OF_BARE)} | ${met(k.data.ratio >= KAFKA_SHAPE_OF_BARE)} |`]
      : []),
  ];
  const kafkaRows = k
    ? [
        '',
        `**The Kafka shape on PostgreSQL.** ${when(k)} Median of ${k.data.rounds} round${k.data.rounds === 1 ? '' : 's'}. Item 1b's batch, upstream and bare loop, with the seven processes' event log in PostgreSQL (a fresh database each round on the server above) instead of one SQLite file they share${sqlite ? `; item 1b as stored (${sqlite.date}) beside it` : ''}.`,
        '',
        '| event log | bare loop | spool | spool / bare | requests in service at the upstream (bare / spool) | peak RSS | target | |',
        '|---|---|---|---|---|---|---|---|',
        `| PostgreSQL | ${fixed(k.data.baselineLinesPerSecond, 0)} requests/s | ${fixed(k.data.spoolLinesPerSecond, 0)} lines/s | ${percent(k.data.ratio)} | ${fixed(k.data.baselineInFlight)} / ${fixed(k.data.spoolInFlight)} | ${fixed(k.data.spoolPeakRssMiB, 0)} MiB | ≥ ${percent(KAFKA_SHAPE_OF_BARE)} | ${met(k.data.ratio >= KAFKA_SHAPE_OF_BARE)} |`,
        ...(k.data.previous
          ? [`| PostgreSQL, previous build (${k.data.previous.build}), its own rounds | ${fixed(k.data.previous.baselineLinesPerSecond, 0)} requests/s | ${fixed(k.data.previous.spoolLinesPerSecond, 0)} lines/s | ${percent(k.data.previous.ratio)} | ${fixed(k.data.previous.baselineInFlight)} / ${fixed(k.data.previous.spoolInFlight)} | ${fixed(k.data.previous.spoolPeakRssMiB, 0)} MiB | ≥ ${percent(KAFKA_SHAPE_OF_BARE)} | ${met(k.data.previous.ratio >= KAFKA_SHAPE_OF_BARE)} |`]
          : []),
        ...(sqlite
          ? [`| SQLite file, shared (item 1b) | ${fixed(sqlite.data.baselineLinesPerSecond, 0)} requests/s | ${fixed(sqlite.data.spoolLinesPerSecond, 0)} lines/s | ${percent(sqlite.data.ratio)} | ${fixed(sqlite.data.baselineInFlight)} / ${fixed(sqlite.data.spoolInFlight)} | ${fixed(sqlite.data.spoolPeakRssMiB, 0)} MiB | ≥ ${percent(KAFKA_SHAPE_OF_BARE)} | ${met(sqlite.data.ratio >= KAFKA_SHAPE_OF_BARE)} |`]
          : []),
        '',
        data('kafkaPostgres', k),
      ]
    : [];
  const section = [
    '## 14. The PostgreSQL event store against bare SQL',
    '',
    `${when(results.postgres)} Median of ${p.rounds} rounds; in each, the adapter and the bare loop run back to back (their order alternating) on the same database${p.previousCommit ? `, and for the appends the previous build's adapter (${p.previousCommit}) in turn with them, on a database of its own on the same server` : ''}: ${p.server}.`,
    '',
    'Appends: one event an append (about 300 bytes of data, as a batch lifecycle event), each awaited before the writer sends its next; through `PostgresEventStore.appendToStream` (a transaction holding the append lock, the stream and event-id checks, the INSERT, NOTIFY, COMMIT; appends of several writers that meet share a transaction) against the same INSERT autocommitted on a connection of each writer, into a table of the same columns and indexes. Catch-up: a catch-up subscription from the start of a log of that many line outcomes (made in SQL) until it has delivered them all, against a bare loop of the same page query. Lag: another process subscribes (its own connections, woken by LISTEN/NOTIFY); this one appends at a steady rate; each event\'s delivery time there less its `recordedAt` (taken at its transaction\'s start, so the commit is included).',
    '',
    '| measure | bare | adapter | adapter / bare | target | |',
    '|---|---|---|---|---|---|',
    ...p.appends.flatMap((row) => [
      `| appends, ${row.writers} writer${row.writers === 1 ? '' : 's'} (${row.events.toLocaleString('en')} events) | ${fixed(row.bare, 0)}/s | ${fixed(row.adapter, 0)}/s | ${percent(row.ratio)} | ≥ ${percent(APPENDS_OF_BARE)} | ${met(row.ratio >= APPENDS_OF_BARE)} |`,
      ...(row.previous !== undefined && row.previousRatio !== undefined
        ? [`| appends, ${row.writers} writer${row.writers === 1 ? '' : 's'}, previous build (${p.previousCommit ?? 'previous'}) | ${fixed(row.bare, 0)}/s | ${fixed(row.previous, 0)}/s | ${percent(row.previousRatio)} | ≥ ${percent(APPENDS_OF_BARE)} | ${met(row.previousRatio >= APPENDS_OF_BARE)} |`]
        : []),
    ]),
    `| catch-up (${p.catchUp.events.toLocaleString('en')} events) | ${fixed(p.catchUp.bare, 0)}/s | ${fixed(p.catchUp.adapter, 0)}/s | ${percent(p.catchUp.ratio)} | ≥ ${percent(CATCH_UP_OF_BARE)} | ${met(p.catchUp.ratio >= CATCH_UP_OF_BARE)} |`,
    `| lag, ${p.lag.ratePerSecond.toLocaleString('en')} appends/s (${p.lag.events.toLocaleString('en')} events) | | p50 ${fixed(p.lag.p50Ms, 0)} ms, p99 ${fixed(p.lag.p99Ms, 0)} ms, max ${fixed(p.lag.maxMs, 0)} ms | | p99 ≤ ${LAG_P99_MS} ms | ${met(p.lag.p99Ms <= LAG_P99_MS)} |`,
    '',
    data('postgres', results.postgres),
    ...kafkaRows,
  ];
  return { summary, sections: [section.join('\n')] };
}
