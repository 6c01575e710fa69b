import type { Logger } from 'pino';
import type { FleetShare } from '../../src/engine/scheduling/interactive-headroom.js';
import type { Consumer, MessageLog } from '../../src/message-log/message-log.js';
import { INTERACTIVE_LOAD_TOPIC, MessageSchemaError, type MessageSchemas } from '../../src/messages/topics.js';
import { RepeatingTask } from '../watches/repeating-task.js';

/** A model's replicas as the exchange sees them (ReplicaPool). */
export interface InteractivePool {
  interactiveEstimate(): { arrivalsPerSecond: number; latencyMs: number } | undefined;
  /** The median of how much later than the engine's floor its interactive requests came since the last call, ms (each call starts anew). */
  interactiveQueueing?(): number | undefined;
  /** With an objective: the p99 of its interactive answers since the last call, and how many (each call starts anew). */
  interactiveAnswered?(): { p99Ms: number; answers: number } | undefined;
  observeRemoteInteractive(source: string, load: number, share: FleetShare, queuedMs?: number, answered?: { p99Ms: number; answers: number }): void;
}

/** How often an API process reports its interactive load: the inference processors' reserve follows it within about this. */
export const REPORT_INTERVAL_MS = 1_000;

/**
 * Publishes, about once a second, the interactive traffic this process serves on each model
 * (arrival rate and mean time in service, and how long its requests waited inside the engines
 * lately), while it has any. On the Kafka shape the API serves
 * /compat/v1 and the inference processors send batch lines to the same engines; they read these
 * reports (InteractiveLoadListener) to keep slots free for traffic they never see.
 */
export class InteractiveLoadReporter {
  private readonly task: RepeatingTask;

  constructor(
    private readonly deps: {
      messageLog: MessageLog;
      schemas: MessageSchemas;
      pools: () => ReadonlyArray<{ model: string; pool: InteractivePool }>;
      source: string;
      now?: () => number;
      log: Pick<Logger, 'warn'>;
    },
    intervalMs = REPORT_INTERVAL_MS,
  ) {
    this.task = new RepeatingTask(() => this.reportOnce(), intervalMs, (error) => deps.log.warn({ err: error }, 'interactive load not reported; trying again'));
  }

  start(): void {
    this.task.start();
  }

  stop(): Promise<void> {
    return this.task.stop();
  }

  async reportOnce(): Promise<number> {
    const at = (this.deps.now ?? Date.now)();
    const messages = [];
    for (const { model, pool } of this.deps.pools()) {
      const queuedMs = pool.interactiveQueueing?.();
      const answered = pool.interactiveAnswered?.();
      const estimate = pool.interactiveEstimate();
      if (!estimate) continue;
      const value = this.deps.schemas.encodeInteractiveLoad({
        model,
        source: this.deps.source,
        arrivals_per_second: estimate.arrivalsPerSecond,
        latency_ms: estimate.latencyMs,
        ...(queuedMs !== undefined ? { queued_ms: Math.max(0, queuedMs) } : {}),
        ...(answered ? { p99_ms: answered.p99Ms, answers: answered.answers } : {}),
        at,
      });
      messages.push({ key: model, value });
    }
    if (messages.length > 0) await this.deps.messageLog.publish(INTERACTIVE_LOAD_TOPIC, messages);
    return messages.length;
  }
}

/**
 * Reads every API process's interactive load reports and has each model's scheduler keep this
 * process's part of the fleet's reserve free for it: the share of the inference partitions it
 * holds (two inference processors holding half each keep half the reserve each). Every process reads every
 * report, so each joins a consumer group of its own.
 */
export class InteractiveLoadListener {
  private consumer: Consumer | undefined;
  /** Reports read (for tests and operators). */
  applied = 0;

  constructor(
    private readonly deps: {
      messageLog: MessageLog;
      schemas: MessageSchemas;
      poolFor: (model: string) => InteractivePool | undefined;
      /** This process's part of the fleet's batch work (0–1). */
      share: () => FleetShare;
      /** This process's own reports, if it also serves the API, are not counted twice. */
      source: string;
      groupId: string;
      now?: () => number;
      /** Reports older than this say nothing about now. */
      freshMs?: number;
      log: Pick<Logger, 'warn'>;
    },
  ) {}

  async start(): Promise<void> {
    const { messageLog, schemas, log } = this.deps;
    // Only reports from now on: older ones say nothing about the load now (see freshMs).
    this.consumer = await messageLog.consume({ groupId: this.deps.groupId, topics: [INTERACTIVE_LOAD_TOPIC], startAt: 'latest' }, async (delivered) => {
      let report;
      try {
        report = schemas.decodeInteractiveLoad(delivered.value);
      } catch (error) {
        if (!(error instanceof MessageSchemaError)) throw error;
        log.warn({ err: error, offset: delivered.offset }, 'malformed interactive-load message skipped');
        return;
      }
      const now = (this.deps.now ?? Date.now)();
      if (report.source === this.deps.source || now - report.at > (this.deps.freshMs ?? 5_000)) return;
      const pool = this.deps.poolFor(report.model);
      if (!pool) return;
      // Little's law: requests in service = arrivals per second × seconds in service.
      const load = (report.arrivals_per_second * report.latency_ms) / 1000;
      const answered = report.p99_ms !== undefined && report.answers !== undefined ? { p99Ms: report.p99_ms, answers: report.answers } : undefined;
      pool.observeRemoteInteractive(report.source, load, this.deps.share(), report.queued_ms, answered);
      this.applied += 1;
    });
  }

  async stop(): Promise<void> {
    await this.consumer?.stop();
    this.consumer = undefined;
  }
}
