import { describe, expect, it } from 'vitest';
import { Lifecycle } from '../src/wiring/lifecycle.js';

describe('the lifecycle of a process', () => {
  it('stops what was opened in reverse order, after the actions that run as the stop begins', async () => {
    const lifecycle = new Lifecycle();
    const done: string[] = [];
    lifecycle.opened('the event store', () => done.push('event store'));
    lifecycle.opened('the projector', async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      done.push('projector');
    });
    lifecycle.whenStopBegins(() => done.push('no new work'));
    lifecycle.opened('the HTTP server', () => done.push('HTTP server'));
    await lifecycle.stop();
    expect(done).toEqual(['no new work', 'HTTP server', 'projector', 'event store']);
  });

  it('says what a stop under way waits for, outermost first, and nothing before a stop', async () => {
    const lifecycle = new Lifecycle();
    let release = () => {};
    lifecycle.opened('the projector', () => new Promise<void>((resolve) => (release = resolve)));
    lifecycle.reportWhileStopping(() => '1 batch chunk finishing');
    lifecycle.reportWhileStopping(() => undefined);
    lifecycle.reportWhileStopping(() => '2 HTTP requests in flight');
    expect(lifecycle.waitingFor()).toEqual([]);
    const stopped = lifecycle.stop();
    expect(lifecycle.stopping).toBe(true);
    expect(lifecycle.waitingFor()).toEqual(['2 HTTP requests in flight', '1 batch chunk finishing', 'the projector']);
    release();
    await stopped;
    expect(lifecycle.waitingFor()).toEqual(['2 HTTP requests in flight', '1 batch chunk finishing']);
  });

  it('stops once: a second stop returns at once and runs nothing again', async () => {
    const lifecycle = new Lifecycle();
    let stops = 0;
    lifecycle.opened('the relay', () => stops++);
    await Promise.all([lifecycle.stop(), lifecycle.stop()]);
    await lifecycle.stop();
    expect(stops).toBe(1);
  });
});
