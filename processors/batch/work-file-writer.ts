import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { BlobStore } from '../../src/blob-store/blob-store.js';
import type { ChunkSpec } from '../../src/domain/batch.js';
import { workRecord, workRecordBytes } from '../../src/domain/work-file.js';
import { workFileBlobKey } from '../../src/domain/blob-keys.js';
import { Uint32List } from '../../src/domain/uint32-list.js';
import { PRIVATE_FILE_MODE, makePrivateDirectoryAsync } from '../../src/platform/private-files.js';
import { physicalLines } from './jsonl-lines.js';

/** The request lines of an input file, as validation found them, in file order: two numbers each. */
export class RequestLines {
  private readonly numbers = new Uint32List();
  private readonly bytes = new Uint32List();

  get length(): number {
    return this.numbers.length;
  }

  /** `number`: 1-based physical line number in the input file; `textBytes`: UTF-8 bytes of its text, without the line ending. */
  add(number: number, textBytes: number): void {
    this.numbers.push(number);
    this.bytes.push(textBytes);
  }

  number(index: number): number {
    return this.numbers.at(index);
  }

  textBytes(index: number): number {
    return this.bytes.at(index);
  }
}

/** Positional writes in flight at once while the input streams through. */
const WRITES_IN_FLIGHT = 64;

/**
 * Lays a batch's input out in the order its lines are to run, as the batch's work file, and cuts it
 * into chunks. The input is read once, as a stream; each record is written straight to its place in
 * a scratch file (record sizes are known from validation), which is then stored whole. Memory holds
 * one offset per line, not the lines. Writing it again (after a crash) gives the same bytes.
 */
export class WorkFileWriter {
  constructor(private readonly deps: { blobStore: BlobStore; scratchDir: string }) {}

  /** `chunkSizes`: lines in each chunk, in order, adding up to the lines. */
  async write(batchId: string, inputKey: string, lines: RequestLines, order: readonly number[], chunkSizes: readonly number[], accountId?: string): Promise<{ key: string; chunks: ChunkSpec[] }> {
    const offsets = new Float64Array(lines.length);
    const chunks: ChunkSpec[] = [];
    let at = 0;
    let chunkEnds = 0;
    for (let position = 0; position < order.length; position++) {
      const index = order[position]!;
      const number = lines.number(index);
      if (position === chunkEnds) {
        chunkEnds += chunkSizes[chunks.length] ?? Number.POSITIVE_INFINITY;
        chunks.push({ index: chunks.length, first_line: number, lines: 0, start: at, end: at });
      }
      const chunk = chunks[chunks.length - 1]! as { lines: number; end: number };
      offsets[index] = at;
      at += workRecordBytes(number, lines.textBytes(index));
      chunk.lines += 1;
      chunk.end = at;
    }

    await makePrivateDirectoryAsync(this.deps.scratchDir);
    const scratch = join(this.deps.scratchDir, `${batchId}.work.${randomBytes(6).toString('hex')}`);
    try {
      const file = await open(scratch, 'w', PRIVATE_FILE_MODE);
      try {
        await file.truncate(at);
        const source = await this.deps.blobStore.get(inputKey);
        const writes = new Set<Promise<void>>();
        let failure: unknown;
        let next = 0;
        try {
          for await (const physical of physicalLines(source)) {
            if (next >= lines.length || physical.number !== lines.number(next)) continue;
            const record = Buffer.from(workRecord(physical.number, physical.text));
            if (record.length !== workRecordBytes(physical.number, lines.textBytes(next))) throw new Error(`input line ${physical.number} changed since validation`);
            const write: Promise<void> = file
              .write(record, 0, record.length, offsets[next]!)
              .then(
                () => undefined,
                (error: unknown) => void (failure ??= error),
              )
              .finally(() => writes.delete(write));
            writes.add(write);
            next += 1;
            if (writes.size >= WRITES_IN_FLIGHT) await Promise.race(writes);
            if (failure) throw failure;
          }
        } finally {
          source.destroy();
          await Promise.all(writes);
        }
        if (failure) throw failure;
        if (next !== lines.length) throw new Error(`input file holds ${next} of the ${lines.length} request lines validated`);
      } finally {
        await file.close();
      }
      const key = workFileBlobKey(batchId, accountId);
      await this.deps.blobStore.put(key, createReadStream(scratch));
      return { key, chunks };
    } finally {
      await unlink(scratch).catch(() => undefined);
    }
  }
}
