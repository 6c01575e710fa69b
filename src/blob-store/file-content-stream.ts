import type { FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';

const READ_BYTES = 64 * 1024;

/**
 * A byte range of an open file, as a stream. Read as any Readable (async iteration, 'data'),
 * each read fills a new buffer, as fs.createReadStream does, no larger than what is left of the
 * range (give `end` for a small file). Piped (an HTTP download), it reads
 * into two buffers and reuses each once the destination's write callback says it has written it.
 *
 * Why piping is different: a download keeps the process busy with little else, so the young
 * generation fills slowly and the buffers of a file read (64 KiB each, outside the JavaScript
 * heap) wait for a young collection, which V8 starts only once about 32 MiB of them have piled up.
 * A 25 MiB output file left some 13 MiB of them in the process at the end of a 50,000-line batch.
 */
export class FileContentStream extends Readable {
  private position: number;
  /** Piped or lent out: either reads the file itself, for one consumer. */
  private claimed = false;

  /** `end` is inclusive, as in fs.createReadStream; undefined: to the end of the file. */
  constructor(
    private readonly handle: FileHandle,
    start = 0,
    private readonly end = Number.POSITIVE_INFINITY,
  ) {
    super({ highWaterMark: READ_BYTES });
    this.position = start;
  }

  private get remaining(): number {
    return this.end - this.position + 1;
  }

  override _read(size: number): void {
    const length = Math.min(size, this.remaining);
    if (length <= 0) {
      this.push(null);
      return;
    }
    const buffer = Buffer.allocUnsafeSlow(length);
    this.handle.read(buffer, 0, length, this.position).then(
      ({ bytesRead }) => {
        if (bytesRead === 0) {
          this.push(null);
          return;
        }
        this.position += bytesRead;
        this.push(bytesRead === length ? buffer : buffer.subarray(0, bytesRead));
      },
      (error: Error) => this.destroy(error),
    );
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // close() waits for a read still under way.
    this.handle.close().then(
      () => callback(error),
      (closeError: Error) => callback(error ?? closeError),
    );
  }

  /**
   * The range's bytes read into `buffer`, one piece at a time, each a view of it that is valid
   * until the next is asked for (the contract of BlobStore.put): a copy into a blob makes no
   * garbage for the collector to find. For a stream nothing has read yet; closed at the end.
   */
  async *lend(buffer: Buffer): AsyncGenerator<Buffer> {
    if (this.claimed || this.readableFlowing !== null || this.readableLength > 0) throw new Error('a file content stream is lent out once, before it is read');
    this.claimed = true;
    try {
      for (let length = Math.min(buffer.length, this.remaining); length > 0; length = Math.min(buffer.length, this.remaining)) {
        const { bytesRead } = await this.handle.read(buffer, 0, length, this.position);
        if (bytesRead === 0) break;
        this.position += bytesRead;
        yield buffer.subarray(0, bytesRead);
      }
    } finally {
      this.destroy();
    }
  }

  /** One destination, written with reused buffers (see the class); ended unless `end: false`. */
  override pipe<T extends NodeJS.WritableStream>(destination: T, options?: { end?: boolean }): T {
    if (this.claimed || this.readableFlowing !== null) throw new Error('a file content stream is piped once, before it is read');
    this.claimed = true;
    void this.copyTo(destination, options?.end ?? true);
    return destination;
  }

  private async copyTo(destination: NodeJS.WritableStream, end: boolean): Promise<void> {
    // A destination destroyed under a write may never call it back; whoever destroys it destroys
    // this stream too (as pipe's users do), which ends the wait.
    const destroyed = new Promise<'destroyed'>((resolve) => this.once('close', () => resolve('destroyed')));
    const buffers = [Buffer.allocUnsafeSlow(READ_BYTES), Buffer.allocUnsafeSlow(READ_BYTES)];
    // Each buffer's write: its callback's error, if any; undefined once written.
    const writes: Array<Promise<Error | null | undefined> | undefined> = [undefined, undefined];
    /** Whether the buffer's write is done and the copy goes on. */
    const written = async (turn: number) => {
      const outcome = await Promise.race([writes[turn], destroyed]);
      if (outcome instanceof Error) throw outcome;
      return outcome !== 'destroyed' && !this.destroyed;
    };
    try {
      for (let turn = 0; ; turn = 1 - turn) {
        if (!(await written(turn))) return;
        const length = Math.min(READ_BYTES, this.remaining);
        const bytesRead = length > 0 ? (await this.handle.read(buffers[turn]!, 0, length, this.position)).bytesRead : 0;
        if (bytesRead === 0) break;
        this.position += bytesRead;
        const chunk = buffers[turn]!.subarray(0, bytesRead);
        writes[turn] = new Promise((resolve) => destination.write(chunk, resolve));
      }
      if (!(await written(0)) || !(await written(1))) return;
      if (end) destination.end();
      // Ends this stream as a pipe's source ends ('end', then 'close'), for those who wait on it.
      this.push(null);
      this.resume();
    } catch (error) {
      this.destroy(error as Error);
    }
  }
}

/** A stream's pieces: read into `buffer` where the stream is a file's content (see FileContentStream.lend), else as it gives them. */
export function lentPieces(stream: Readable, buffer: Buffer): AsyncIterable<Buffer> {
  return stream instanceof FileContentStream ? stream.lend(buffer) : (stream as AsyncIterable<Buffer>);
}
