import { describe, expect, it } from 'vitest';
import { ChunkAdmission, type HeldChunk, nextChunk } from '../processors/batch/chunk-admission.js';

const NOW = 1_790_000_000_000;
const MINUTE = 60_000;
const loose = (job = 'loose'): HeldChunk => ({ deadline: NOW + 24 * 60 * MINUTE, fairnessKey: job });
const tight = (job = 'tight'): HeldChunk => ({ deadline: NOW + MINUTE / 2, fairnessKey: job });
const background = (job = 'bg'): HeldChunk => ({ fairnessKey: job });
const settings = { parallel: 2 };

describe('which held chunk starts next', () => {
  it('starts nothing when nothing is held', () => {
    expect(nextChunk([], [], NOW, settings)).toBeUndefined();
  });

  it('starts the most urgent held chunk, whatever the order it arrived in', () => {
    expect(nextChunk([loose(), loose(), tight()], [], NOW, settings)).toBe(2);
    expect(nextChunk([background(), loose()], [], NOW, settings)).toBe(1);
  });

  it('keeps arrival order among equally urgent chunks of one job', () => {
    expect(nextChunk([loose(), loose()], [], NOW, settings)).toBe(0);
  });

  it('gives equally urgent jobs the chunks in turn: the job with fewer running goes next', () => {
    expect(nextChunk([loose('big'), loose('big'), loose('small')], [loose('big')], NOW, settings)).toBe(2);
    expect(nextChunk([loose('small'), loose('big')], [loose('small')], NOW, settings)).toBe(1);
  });

  it('holds chunks back once `parallel` run, unless one is more urgent than every chunk running', () => {
    expect(nextChunk([loose()], [loose(), loose()], NOW, settings)).toBeUndefined();
    expect(nextChunk([loose(), tight()], [loose(), loose()], NOW, settings)).toBe(1);
    // Not past twice `parallel`, and not for a chunk only as urgent as one running.
    expect(nextChunk([tight()], [tight(), loose(), loose(), loose()], NOW, settings)).toBeUndefined();
    expect(nextChunk([tight()], [tight(), tight()], NOW, settings)).toBeUndefined();
  });

  it('gives a chunk that has read its lines no place to read: the next starts, up to twice `parallel` running in all unless more urgent than all', () => {
    // Two reading, none draining: the place is full.
    expect(nextChunk([loose()], [loose(), loose()], NOW, settings, [])).toBeUndefined();
    // One reading, one draining (counted apart): the next starts.
    expect(nextChunk([loose()], [loose()], NOW, settings, [loose()])).toBe(0);
    // Reading and draining together at twice `parallel`: only a chunk more urgent than every running one starts.
    expect(nextChunk([loose()], [loose()], NOW, settings, [loose(), loose(), loose()])).toBeUndefined();
    expect(nextChunk([loose('other')], [], NOW, settings, [loose(), loose(), loose(), loose()])).toBeUndefined();
    expect(nextChunk([tight()], [loose()], NOW, settings, [loose(), loose(), loose()])).toBe(0);
    expect(nextChunk([tight()], [tight()], NOW, settings, [tight(), tight(), tight()])).toBeUndefined();
    // Reading chunks alone at twice `parallel`: nothing starts, however urgent.
    expect(nextChunk([tight()], [loose(), loose(), loose(), loose()], NOW, settings, [])).toBeUndefined();
  });

  it('starts a chunk of a job arriving while another fills every place, past `parallel`, up to its share', () => {
    const four = { parallel: 4 };
    const big = [loose('big'), loose('big'), loose('big'), loose('big')];
    expect(nextChunk([loose('big'), loose('small')], big, NOW, four)).toBe(1);
    // Two jobs: a share of two each.
    expect(nextChunk([loose('small')], [...big, loose('small')], NOW, four)).toBe(0);
    expect(nextChunk([loose('small')], [...big, loose('small'), loose('small')], NOW, four)).toBeUndefined();
    // The job over its share gets no place back until the running ones are below `parallel`.
    expect(nextChunk([loose('big')], [...big, loose('small'), loose('small')], NOW, four)).toBeUndefined();
    expect(nextChunk([loose('big'), loose('small')], [loose('big'), loose('small'), loose('small')], NOW, four)).toBe(0);
    // Not while a more urgent job runs.
    expect(nextChunk([loose('small')], [tight(), tight(), tight(), tight()], NOW, four)).toBeUndefined();
  });
});

describe('ChunkAdmission', () => {
  it('starts the next chunk once a running one has read its lines, before its answers are in', async () => {
    const admission = new ChunkAdmission({ parallel: 1 }, () => NOW);
    const first = await admission.admit(loose());
    let secondStarted = false;
    const second = admission.admit(loose()).then((place) => {
      secondStarted = true;
      return place;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(secondStarted).toBe(false);
    first.linesRead();
    const secondPlace = await second;
    expect(admission.counts).toEqual({ held: 0, running: 2, draining: 1 });
    // A third waits: one reads, and the cap (twice `parallel`) counts the draining one too.
    let thirdStarted = false;
    const third = admission.admit(loose()).then((place) => {
      thirdStarted = true;
      return place;
    });
    secondPlace.linesRead();
    await new Promise((resolve) => setImmediate(resolve));
    expect(thirdStarted).toBe(false);
    expect(admission.counts).toEqual({ held: 1, running: 2, draining: 2 });
    first.release();
    (await third).release();
    secondPlace.release();
    // Told twice, or after the end, changes nothing.
    first.linesRead();
    first.release();
    expect(admission.counts).toEqual({ held: 0, running: 0, draining: 0 });
  });

  it('starts held chunks by urgency as running ones finish, and drops the held ones on stop', async () => {
    const admission = new ChunkAdmission({ parallel: 1 }, () => NOW);
    const order: string[] = [];
    const first = await admission.admit(loose());
    order.push('loose-1');
    const second = admission.admit(loose()).then((place) => {
      order.push('loose-2');
      return place;
    });
    const third = admission.admit(background()).then((place) => {
      order.push('background');
      return place;
    });
    const urgent = admission.admit(tight()).then((place) => {
      order.push('tight');
      return place;
    });
    // The tight chunk is more urgent than the one running: it starts at once, past `parallel`.
    (await urgent).release();
    expect(order).toEqual(['loose-1', 'tight']);
    expect(admission.counts).toEqual({ held: 2, running: 1, draining: 0 });
    first.release();
    (await second).release();
    (await third).release();
    expect(order).toEqual(['loose-1', 'tight', 'loose-2', 'background']);
    expect(admission.counts).toEqual({ held: 0, running: 0, draining: 0 });

    const running = await admission.admit(loose());
    const dropped = admission.admit(loose());
    admission.dropHeld(new Error('stopping'));
    await expect(dropped).rejects.toThrow('stopping');
    running.release();
    running.release();
    expect(admission.counts).toEqual({ held: 0, running: 0, draining: 0 });
  });
});
