/**
 * How both adapters name one partition of one topic in their bookkeeping (committed offsets, a
 * partition's owner, what a member holds). Topic names hold no `/` (Kafka allows letters, digits,
 * `.`, `_` and `-`), so a key names one partition only.
 */
export const partitionKey = (topic: string, partition: number): string => `${topic}/${partition}`;
