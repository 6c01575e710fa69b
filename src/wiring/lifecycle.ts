/**
 * Stop in the reverse of the opening order. Each resource registers its stop as it is opened, and a
 * resource is opened after the resources it uses, so it stops before them by construction: the
 * HTTP server, opened last because it serves everything, stops first; the event store, opened
 * first, closes last. A stop runs one step at a time and can say what it is waiting for.
 */
export class Lifecycle {
  private readonly stops: Array<{ readonly what: string; readonly stop: () => unknown }> = [];
  private readonly atStopBegin: Array<() => void> = [];
  private readonly reports: Array<() => string | undefined> = [];
  private stopBegun = false;
  private step = '';

  /** Registers how to stop what was just opened. */
  opened(what: string, stop: () => unknown): void {
    this.stops.push({ what, stop });
  }

  /** Runs as a stop begins, before any step: a resource takes no new work from then on. */
  whenStopBegins(action: () => void): void {
    this.atStopBegin.push(action);
  }

  /** Something a stop under way may wait for, in words (undefined when it waits for nothing). */
  reportWhileStopping(report: () => string | undefined): void {
    this.reports.push(report);
  }

  get stopping(): boolean {
    return this.stopBegun;
  }

  /** What a stop under way still waits for, outermost first (empty when no stop began). */
  waitingFor(): string[] {
    if (!this.stopBegun) return [];
    const waits = [...this.reports].reverse().map((report) => report());
    return [...waits, this.step].filter((wait): wait is string => Boolean(wait));
  }

  /** Stops every opened resource in reverse order; a second call returns at once. */
  async stop(): Promise<void> {
    if (this.stopBegun) return;
    this.stopBegun = true;
    for (const action of this.atStopBegin) action();
    for (const { what, stop } of [...this.stops].reverse()) {
      this.step = what;
      await stop();
    }
    this.step = '';
  }
}
