import { describe, expect, it } from 'vitest';
import { heapPolicyParts } from '../src/process/heap-policy.js';

describe('the heap policy', () => {
  it('leaves to node the parts of the heap it was given flags for', () => {
    expect(heapPolicyParts([])).toEqual({ youngGeneration: true, oldGeneration: true });
    expect(heapPolicyParts(['--max-old-space-size=64', '--import', 'x.js'])).toEqual({ youngGeneration: true, oldGeneration: true });
    expect(heapPolicyParts(['--max-semi-space-size=16'])).toEqual({ youngGeneration: false, oldGeneration: true });
    expect(heapPolicyParts(['--semi_space_growth_factor', '1', '--heap-growing-percent=80'])).toEqual({ youngGeneration: false, oldGeneration: false });
  });
});
