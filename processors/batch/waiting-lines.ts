/** Counts a chunk's lines sent to the engine and not yet admitted; room() waits while there are `limit`. */
export class WaitingLines {
  private count = 0;
  private wake: (() => void) | undefined;

  constructor(private readonly limit: number) {}

  /** Undefined where there is room now (every batch line asks: no promise made then); else resolves once there is. */
  room(): Promise<void> | undefined {
    return this.count >= this.limit ? this.untilRoom() : undefined;
  }

  private async untilRoom(): Promise<void> {
    while (this.count >= this.limit) await new Promise<void>((resolve) => (this.wake = resolve));
  }

  /** A line goes to the engine; the returned function says it left the queue (admitted, or finished without a slot), once. */
  enter(): () => void {
    this.count++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.count--;
      const wake = this.wake;
      this.wake = undefined;
      wake?.();
    };
  }
}
