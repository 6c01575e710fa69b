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
  it('starts held chunks by urgency as running ones finish, and drops the held ones on stop', async () => {
    const admission = new ChunkAdmission({ parallel: 1 }, () => NOW);
    const order: string[] = [];
    const first = await admission.admit(loose());
    order.push('loose-1');
    const second = admission.admit(loose()).then((release) => {
      order.push('loose-2');
      return release;
    });
    const third = admission.admit(background()).then((release) => {
      order.push('background');
      return release;
    });
    const urgent = admission.admit(tight()).then((release) => {
      order.push('tight');
      return release;
    });
    // The tight chunk is more urgent than the one running: it starts at once, past `parallel`.
    (await urgent)();
    expect(order).toEqual(['loose-1', 'tight']);
    expect(admission.counts).toEqual({ held: 2, running: 1 });
    first();
    (await second)();
    (await third)();
    expect(order).toEqual(['loose-1', 'tight', 'loose-2', 'background']);
    expect(admission.counts).toEqual({ held: 0, running: 0 });

    const running = await admission.admit(loose());
    const dropped = admission.admit(loose());
    admission.dropHeld(new Error('stopping'));
    await expect(dropped).rejects.toThrow('stopping');
    running();
    running();
    expect(admission.counts).toEqual({ held: 0, running: 0 });
  });
});
