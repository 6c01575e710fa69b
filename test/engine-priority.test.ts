import { describe, expect, it } from 'vitest';
import { enginePriority } from '../src/engine/scheduling/engine-priority.js';
import { urgencyLevel } from '../src/engine/scheduling/urgency.js';

const now = Date.UTC(2025, 0, 1);
const minute = 60_000;
const hour = 60 * minute;

describe('urgency levels', () => {
  it('double in slack per level: overdue and under a minute are the most urgent, no deadline the least', () => {
    expect(urgencyLevel(now - hour, now)).toBe(0);
    expect(urgencyLevel(now + 30_000, now)).toBe(0);
    expect(urgencyLevel(now + 90_000, now)).toBe(1);
    expect(urgencyLevel(now + 3 * minute, now)).toBe(2);
    const levels = [1, 2, 8, 24].map((hours) => urgencyLevel(now + hours * hour, now));
    for (let i = 1; i < levels.length; i++) expect(levels[i]).toBeGreaterThan(levels[i - 1]!);
    expect(urgencyLevel(undefined, now)).toBeGreaterThan(urgencyLevel(now + 10 * 365 * 24 * hour, now));
  });

  it('puts deadlines within a factor of two of each other in the same level most of the time', () => {
    // 23 h and 24 h of slack: equally urgent for a day-long SLA.
    expect(urgencyLevel(now + 23 * hour, now)).toBe(urgencyLevel(now + 24 * hour, now));
  });
});

describe('engine priority hints', () => {
  const interactive = { serviceClass: 'interactive' as const };
  const tight = { serviceClass: 'batch' as const, deadline: now + hour };
  const loose = { serviceClass: 'batch' as const, deadline: now + 24 * hour };
  const background = { serviceClass: 'background' as const };
  const order = [interactive, tight, loose, background];

  it('vLLM: lower value is scheduled first, so interactive < tight batch < loose batch < background', () => {
    const values = order.map((request) => enginePriority('vllm', request, now)?.priority);
    for (const value of values) expect(Number.isInteger(value)).toBe(true);
    for (let i = 1; i < values.length; i++) expect(values[i]!).toBeGreaterThan(values[i - 1]!);
    expect(values[0]).toBe(0);
  });

  it('SGLang: a larger value is scheduled first by default, smaller with --schedule-low-priority-values-first', () => {
    const values = order.map((request) => enginePriority('sglang', request, now)?.priority);
    for (let i = 1; i < values.length; i++) expect(values[i]!).toBeLessThan(values[i - 1]!);
    for (const value of values) expect(value!).toBeGreaterThanOrEqual(0);
    const lowFirst = order.map((request) => enginePriority('sglang', request, now, { lowValuesFirst: true })?.priority);
    expect(lowFirst).toEqual(order.map((request) => enginePriority('vllm', request, now)?.priority));
  });

  it('adds nothing for servers without a priority field', () => {
    expect(enginePriority('openai', tight, now)).toBeUndefined();
    expect(enginePriority('builtin', interactive, now)).toBeUndefined();
  });

  it('a batch past its deadline ranks with the most urgent batches, still after interactive', () => {
    const overdue = enginePriority('vllm', { serviceClass: 'batch', deadline: now - hour }, now)!.priority;
    expect(overdue).toBeGreaterThan(0);
    expect(overdue).toBeLessThanOrEqual(enginePriority('vllm', tight, now)!.priority);
  });
});
