import { describe, expect, it } from 'vitest';
import { RepeatingTask } from '../processors/watches/repeating-task.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('RepeatingTask', () => {
  it('runs at start and again after each run ends, never two at once; a failure is reported and the next run goes ahead; stop waits for the run under way', async () => {
    let runs = 0;
    let atOnce = 0;
    let mostAtOnce = 0;
    const errors: unknown[] = [];
    const task = new RepeatingTask(
      async () => {
        runs += 1;
        atOnce += 1;
        mostAtOnce = Math.max(mostAtOnce, atOnce);
        await sleep(30);
        atOnce -= 1;
        if (runs === 2) throw new Error('second run fails');
      },
      5,
      (error) => errors.push(error),
    );
    expect(task.stopped).toBe(true);
    task.start();
    task.start();
    expect(task.stopped).toBe(false);
    await sleep(150);
    const stopping = task.stop();
    expect(task.stopped).toBe(true);
    await stopping;
    expect(atOnce).toBe(0);
    const ran = runs;
    await sleep(60);
    expect(runs).toBe(ran);
    expect(ran).toBeGreaterThanOrEqual(3);
    expect(mostAtOnce).toBe(1);
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe('second run fails');
  });
});
