// The benchmarks' stored figures: each section of bench/RESULTS.md keeps its figures as JSON in a
// comment, so a run of some benchmarks keeps the others' figures.
import { existsSync, readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../src/platform/package-root.js';
import type { BatchBenchResult } from './batch.js';
import type { BatchingEngineResult } from './batching-engine.js';
import type { BuiltinResult } from './builtin-engine.js';
import type { CheckpointResult } from './checkpoint.js';
import type { ImagesResult } from './images.js';
import type { PostgresStoreResult } from './postgres-store.js';
import type { PrefixResult } from './prefix.js';
import type { RealModelsResult } from './real-models.js';
import type { ReplayResult } from './replay.js';
import type { SchedulerResult } from './scheduler.js';
import type { HistoryResult, SmallBatchesResult } from './small-batches.js';
import type { UploadResult } from './upload.js';
import type { ValidationResult } from './validation.js';
import type { WeightSwapResult } from './weight-swap.js';

export interface Stored<T> {
  date: string;
  machine: string;
  data: T;
}
export interface Results {
  upload?: Stored<UploadResult[]>;
  validation?: Stored<ValidationResult>;
  /** `embeddings`: the large batch's lines as embeddings requests (stored since 2026-12-01). */
  overhead?: Stored<{ large: BatchBenchResult; small: BatchBenchResult; embeddings?: BatchBenchResult; capped?: { large: BatchBenchResult; small: BatchBenchResult }; previous?: { build: string; large: BatchBenchResult; small: BatchBenchResult; embeddings?: BatchBenchResult } }>;
  replay?: Stored<ReplayResult>;
  batch?: Stored<BatchBenchResult & { previous?: BatchBenchResult & { build: string } }>;
  kafka?: Stored<BatchBenchResult & { previous?: BatchBenchResult & { build: string } }>;
  checkpoint?: Stored<CheckpointResult>;
  swap?: Stored<WeightSwapResult>;
  builtin?: Stored<BuiltinResult>;
  images?: Stored<ImagesResult>;
  scheduler?: Stored<SchedulerResult>;
  schedulerBefore?: Stored<SchedulerResult>;
  schedulerKafka?: Stored<SchedulerResult>;
  schedulerKafkaBefore?: Stored<SchedulerResult>;
  prefix?: Stored<PrefixResult>;
  batching?: Stored<BatchingEngineResult>;
  /** The fixed-latency scheduler benchmark (9) run on the previous build beside this one (item 11). */
  schedulerPrevious?: Stored<SchedulerResult>;
  /** Item 1 run on the previous build beside this one (item 11). */
  batchPrevious?: Stored<BatchBenchResult>;
  /** Item 12: many small batches at once. */
  smallBatches?: Stored<SmallBatchesResult>;
  /** Item 13: a service's speed as it ages. */
  history?: Stored<HistoryResult>;
  /** Item 14: the PostgreSQL event store against bare SQL. */
  postgres?: Stored<PostgresStoreResult>;
  /** Item 14: item 1b (the Kafka shape) with its log in PostgreSQL. */
  kafkaPostgres?: Stored<BatchBenchResult & { previous?: BatchBenchResult & { build: string } }>;
  /** Item 15: the built-in embedding model, and the first token of a relayed stream. */
  realModels?: Stored<RealModelsResult>;
}

/** How the sections of RESULTS.md format figures (bench/results-document.ts makes it). */
export interface ResultsFormat {
  fixed(value: number, digits?: number): string;
  percent(ratio: number): string;
  met(ok: boolean): string;
  when(stored: Stored<unknown>): string;
  data(name: string, stored: Stored<unknown>): string;
}

export const resultsPath = join(packageRoot, 'bench', 'RESULTS.md');
/** Each section keeps its figures as JSON in a comment, so a partial run keeps the other sections. */
export function previousResults(): Results {
  const results: Record<string, unknown> = {};
  if (!existsSync(resultsPath)) return results;
  for (const match of readFileSync(resultsPath, 'utf8').matchAll(/<!-- bench-data (\w+) (.*?) -->/g)) results[match[1]!] = JSON.parse(match[2]!);
  return results as Results;
}

export const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
export const stamp = <T>(data: T): Stored<T> => ({ date: new Date().toISOString().slice(0, 10), machine, data });

/** The heap the memory rounds of the pure-overhead batch hold the service to (item 8). */
export const CAPPED_HEAP_MIB = 64;
