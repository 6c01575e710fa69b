/**
 * One run at a time per key, for handlers that several messages may ask at once to bring one thing
 * up to date (validate batch X, finalize batch X): a call while a run of its key is under way
 * queues one more run after it, which any later call joins, so the last call always sees a run
 * that started after it was made (and so read the state it was called about), and no two runs of
 * one key overlap.
 */
export class RunsByKey {
  private readonly runs = new Map<string, { running: Promise<void>; queued?: Promise<void> }>();

  run(key: string, task: () => Promise<void>): Promise<void> {
    const entry = this.runs.get(key);
    if (!entry) return this.start(key, task);
    if (entry.queued) return entry.queued;
    const queued = entry.running.then(
      () => undefined,
      () => undefined,
    ).then(() => {
      this.runs.delete(key);
      return this.start(key, task);
    });
    entry.queued = queued;
    return queued;
  }

  /** Keys with a run under way or queued. */
  get size(): number {
    return this.runs.size;
  }

  private start(key: string, task: () => Promise<void>): Promise<void> {
    const running = Promise.resolve()
      .then(task)
      .finally(() => {
        const entry = this.runs.get(key);
        if (entry?.running === running && !entry.queued) this.runs.delete(key);
      });
    this.runs.set(key, { running });
    return running;
  }
}
