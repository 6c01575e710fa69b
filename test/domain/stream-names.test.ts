import { describe, expect, it } from 'vitest';
import { batchLinesStreamName, batchStreamName, fileStreamName, jobStreamName, parseStreamName, streamKind, webhookDeliveryStreamName, webhookStreamName, weightsStreamName } from '../../src/domain/stream-names.js';

describe('stream names', () => {
  it('parse back to what made them', () => {
    expect(parseStreamName(batchStreamName('batch_abc'))).toEqual({ kind: 'batch', id: 'batch_abc' });
    expect(parseStreamName(batchLinesStreamName('batch_abc', 12))).toEqual({ kind: 'batchlines', id: 'batch_abc', chunk: 12 });
    expect(parseStreamName(fileStreamName('file-abc'))).toEqual({ kind: 'file', id: 'file-abc' });
    expect(parseStreamName(jobStreamName('job-demo'))).toEqual({ kind: 'job', id: 'job-demo' });
    expect(parseStreamName(weightsStreamName('org/model-7b'))).toEqual({ kind: 'weights', id: 'org/model-7b' });
    expect(parseStreamName(webhookStreamName('wh_1'))).toEqual({ kind: 'webhook', id: 'wh_1' });
    expect(parseStreamName(webhookDeliveryStreamName('wh_1', 'evt_2'))).toEqual({ kind: 'webhookdelivery', id: 'wh_1', eventId: 'evt_2' });
  });

  it('take the chunk after the last dash of a line-outcome stream', () => {
    expect(parseStreamName('batchlines-a-b-3')).toEqual({ kind: 'batchlines', id: 'a-b', chunk: 3 });
  });

  it('name nothing for other streams, empty ids and line streams without a chunk', () => {
    for (const name of ['orders-1', 'batch-', 'file-', 'batchlines-batch_abc', 'batchlines-batch_abc-x', 'Batch-x', 'webhookdelivery-wh_1', 'webhookdelivery-a.b.c', '']) {
      expect(parseStreamName(name)).toBeUndefined();
      expect(streamKind(name)).toBeUndefined();
    }
  });

  it('have the kind that parsing them gives, said without parsing', () => {
    for (const name of [batchStreamName('b'), batchLinesStreamName('batch_a-b', 7), fileStreamName('f'), jobStreamName('j'), weightsStreamName('org/m'), webhookStreamName('w'), webhookDeliveryStreamName('w', 'e'), 'batchlines-a-b-3']) {
      expect(streamKind(name)).toBe(parseStreamName(name)!.kind);
    }
  });
});
