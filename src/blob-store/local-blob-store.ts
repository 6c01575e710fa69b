import { randomUUID } from 'node:crypto';
import { closeSync, fstatSync, fsync as fsyncCallback, open as openCallback, openSync, readSync, write as writeCallback } from 'node:fs';
import { type FileHandle, open, opendir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { PRIVATE_FILE_MODE, makePrivateDirectoryAsync } from '../platform/private-files.js';
import { type BlobEntry, type BlobHead, type BlobStore, BlobNotFoundError, assertBlobKey } from './blob-store.js';
import { FileContentStream } from './file-content-stream.js';

/**
 * A blob no larger than this (or the range of one asked for) is read whole when asked for, with
 * system calls made in place (open, fstat, read, close: 8–10 µs of the main thread for a small
 * file), rather than as four operations handed to libuv's threads (25–30 µs unloaded, and about
 * 100 µs each on two busy cores, where waking a pool thread and being woken again are context
 * switches): a wave of small batches reads each input twice (validation, the chunk's run;
 * bench/FINDINGS.md, 2026-11-30 evening). Such a blob was mostly written moments
 * before and is read from the page cache; a larger one streams. Writes stay handed on (see
 * putWhole): creating, writing and renaming a file wait for the file system's journal, which every
 * fsync commits.
 */
const IN_PLACE_BYTES = 64 * 1024;

/** Bytes a put writes at once (see put). */
const STAGE_BYTES = 256 * 1024;

/**
 * A put asks the disk to write back what it has been given every this many bytes, while more
 * arrives, so the fsync that ends it waits for the last few MiB rather than the whole object
 * (200 MiB: about 3 ms instead of 54 here).
 */
const WRITE_BACK_BYTES = 8 * 1024 * 1024;

/**
 * Staging buffers puts have finished with, for the next puts: a batch writes two small parts per
 * chunk, and two fresh 256 KiB buffers for each (half a GiB of memory outside the heap for a
 * 50,000-line batch) had V8 collect the whole heap for the memory they held, some fifty times.
 */
const spareStages: Buffer[] = [];
const SPARE_STAGES = 4;

function takeStage(): Buffer {
  return spareStages.pop() ?? Buffer.allocUnsafe(STAGE_BYTES);
}

function giveBackStages(stages: readonly Buffer[]): void {
  for (const stage of stages) if (spareStages.length < SPARE_STAGES) spareStages.push(stage);
}

async function writeAll(file: FileHandle, bytes: Buffer): Promise<void> {
  for (let at = 0; at < bytes.length; ) at += (await file.write(bytes, at, bytes.length - at)).bytesWritten;
}

/**
 * Blobs as files under a directory. A put writes to a hidden sibling and renames it into place
 * once the stream has ended and been flushed, so a reader never sees half an object.
 */
export class LocalBlobStore implements BlobStore {
  readonly kind = 'local';
  readonly description: string;

  constructor(private readonly root: string) {
    this.description = `local directory ${root}`;
  }

  private pathOf(key: string): string {
    assertBlobKey(key);
    return join(this.root, ...key.split('/'));
  }

  async put(key: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    const path = this.pathOf(key);
    // What arrives first is copied aside (a producer may reuse a chunk's memory once it asks for
    // the next; copies the size of what came, not staging buffers: many small puts run at once):
    // a body that ends within IN_PLACE_BYTES is written whole (putWhole).
    const iterator = body[Symbol.asyncIterator]();
    const head: Buffer[] = [];
    let held = 0;
    for (;;) {
      const next = await iterator.next();
      if (next.done) return putWhole(path, head.length === 1 ? head[0]! : Buffer.concat(head, held));
      if (held + next.value.length > IN_PLACE_BYTES) return this.putStreamed(path, continued([...head, next.value], iterator));
      head.push(Buffer.from(next.value));
      held += next.value.length;
    }
  }

  /** Writes a body of any size through two staging buffers, flushed as they fill. */
  private async putStreamed(path: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    const partial = partialOf(path);
    let handle: FileHandle | undefined;
    const stages: Buffer[] = [];
    let writing: Promise<unknown> = Promise.resolve();
    let writingBack: Promise<unknown> = Promise.resolve();
    try {
      handle = await openPartial(partial, open);
      const file = handle;
      // Chunks are copied into one of two staging buffers, each written whole while the other
      // fills: the producer may reuse a chunk's memory as soon as it is copied, and the disk sees
      // writes of STAGE_BYTES however small the chunks (an upload's come as the multipart parser
      // cuts them).
      stages.push(takeStage(), takeStage());
      let stage = 0;
      let filled = 0;
      let notWrittenBack = 0;
      const flush = async () => {
        const bytes = stages[stage]!.subarray(0, filled);
        await writing;
        if (notWrittenBack >= WRITE_BACK_BYTES) {
          await writingBack;
          writingBack = file.datasync();
          writingBack.catch(() => undefined); // awaited at the next one or the end
          notWrittenBack = 0;
        }
        notWrittenBack += bytes.length;
        writing = writeAll(file, bytes);
        writing.catch(() => undefined); // awaited at the next flush or the end
        stage = 1 - stage;
        filled = 0;
      };
      for await (const chunk of body) {
        for (let at = 0; at < chunk.length; ) {
          const taken = Math.min(STAGE_BYTES - filled, chunk.length - at);
          stages[stage]!.set(chunk.subarray(at, at + taken), filled);
          filled += taken;
          at += taken;
          if (filled === STAGE_BYTES) await flush();
        }
      }
      if (filled > 0) await flush();
      await writing;
      await writingBack;
      await file.sync();
      await file.close();
      handle = undefined;
      await rename(partial, path);
    } catch (error) {
      await Promise.allSettled([writing, writingBack]);
      await handle?.close().catch(() => undefined);
      await rm(partial, { force: true });
      throw error;
    } finally {
      // Every write from them is over (awaited above): the next put may fill them.
      giveBackStages(stages);
    }
  }

  async get(key: string, range?: { start: number; end: number }): Promise<Readable> {
    const path = this.pathOf(key);
    const inPlace = readInPlace(key, path, range);
    if (inPlace) return inPlace;
    // Opened again, and its size taken from this handle: a put under the same key may have
    // replaced the file since it was looked at in place.
    let handle;
    try {
      handle = await open(path, 'r');
    } catch (error) {
      throw missingAsNotFound(key, error);
    }
    // A blob does not change once written, so its size bounds the reads: each buffer is then no
    // larger than what is left. Chunks' parts (tens of KiB each) read
    // with 64 KiB buffers had the finalizer of a 50,000-line batch hold 24 MiB of them at its
    // peak, 12 MiB since (bench/FINDINGS.md, memory).
    let size: number;
    try {
      ({ size } = await handle.stat());
    } catch (error) {
      await handle.close();
      throw error;
    }
    return new FileContentStream(handle, range?.start, Math.min(range?.end ?? Number.POSITIVE_INFINITY, size - 1));
  }

  async head(key: string): Promise<BlobHead | undefined> {
    try {
      const info = await stat(this.pathOf(key));
      return info.isFile() ? { size: info.size, modifiedAt: info.mtime } : undefined;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  async *list(prefix: string): AsyncIterable<string> {
    for await (const file of this.objects(prefix)) yield file.key;
  }

  async *entries(prefix: string): AsyncIterable<BlobEntry> {
    for await (const file of this.objects(prefix)) {
      const modifiedAt = await modifiedAtOf(file.path);
      if (modifiedAt) yield { key: file.key, modifiedAt };
    }
  }

  /**
   * The objects under a prefix, from the folders alone (no stat: a file's age costs one each). The
   * walk starts at the deepest folder the prefix names whole, so a list by one batch's prefix
   * reads that batch's folder and nothing else: from the root, every batch's end read every blob
   * ever kept, and a service slowed as it aged (bench/FINDINGS.md, history).
   */
  private async *objects(prefix: string): AsyncIterable<{ key: string; path: string }> {
    const folder = prefix.slice(0, prefix.lastIndexOf('/') + 1);
    if (folder !== '') assertBlobKey(folder.slice(0, -1));
    for await (const file of walk(join(this.root, ...folder.split('/').filter(Boolean)))) {
      if (isPartial(file.name)) continue;
      const key = relative(this.root, file.path).split(sep).join('/');
      if (key.startsWith(prefix)) yield { key, path: file.path };
    }
  }

  async removeAbandonedWrites(before: Date): Promise<number> {
    let removed = 0;
    for await (const file of walk(this.root)) {
      if (!isPartial(file.name)) continue;
      const modifiedAt = await modifiedAtOf(file.path);
      if (modifiedAt && modifiedAt < before) {
        await rm(file.path, { force: true });
        removed += 1;
      }
    }
    return removed;
  }
}

/** The hidden sibling a put writes before renaming it into place. */
const partialOf = (path: string) => join(dirname(path), `.${randomUUID()}.partial`);

/** The bytes held, then the rest of the body; ending early (a failed write) ends the body too. */
async function* continued(head: readonly Uint8Array[], rest: AsyncIterator<Uint8Array>): AsyncGenerator<Uint8Array> {
  let done = false;
  try {
    yield* head;
    for (;;) {
      const next = await rest.next();
      if (next.done) {
        done = true;
        return;
      }
      yield next.value;
    }
  } finally {
    if (!done) await rest.return?.();
  }
}

const openFile = promisify(openCallback);
const syncFile = promisify(fsyncCallback);
const writeToFile = promisify(writeCallback);

/**
 * A body of at most IN_PLACE_BYTES, whole in memory: one write from it, through node:fs's callbacks
 * rather than a FileHandle's promises (31–39 against 34–43 µs of the main thread a put, in a script), and
 * the close made in place (after the fsync nothing is left for it to wait on). The open, write,
 * fsync and rename stay handed to libuv's threads: each may wait for the file system's journal,
 * which every fsync commits (a write made in place cost a 50,000-line batch, whose chunks' parts
 * are small puts, about 13% more CPU a line). A wave of many small batches writes one output file
 * each (bench/FINDINGS.md, 2026-11-30 night).
 */
async function putWhole(path: string, bytes: Uint8Array): Promise<void> {
  const partial = partialOf(path);
  let fd: number | undefined;
  try {
    fd = await openPartial(partial, openFile);
    for (let at = 0; at < bytes.length; ) at += (await writeToFile(fd, bytes, at, bytes.length - at, null)).bytesWritten;
    await syncFile(fd);
    closeSync(fd);
    fd = undefined;
    await rename(partial, path);
  } catch (error) {
    if (fd !== undefined) closeSync(fd);
    await rm(partial, { force: true });
    throw error;
  }
}

/**
 * Creates a put's hidden partial file with `open` (a FileHandle's or a file descriptor's). Its
 * folder mostly exists (every file's content is under files/): it is made only when the open finds
 * it missing, one operation fewer for most puts.
 */
async function openPartial<Opened>(partial: string, open: (path: string, flags: string, mode: number) => Promise<Opened>): Promise<Opened> {
  try {
    return await open(partial, 'wx', PRIVATE_FILE_MODE);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  await makePrivateDirectoryAsync(dirname(partial));
  return open(partial, 'wx', PRIVATE_FILE_MODE);
}

/** A missing file is BlobNotFoundError when the blob is asked for, rather than a stream error later. */
function missingAsNotFound(key: string, error: unknown): unknown {
  return (error as NodeJS.ErrnoException).code === 'ENOENT' ? new BlobNotFoundError(key) : error;
}

/**
 * The blob's bytes (or the range's) as a stream of one buffer, read now, when they are no more
 * than IN_PLACE_BYTES; undefined for a larger one.
 */
function readInPlace(key: string, path: string, range: { start: number; end: number } | undefined): Readable | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    throw missingAsNotFound(key, error);
  }
  try {
    const { size } = fstatSync(fd);
    const start = range?.start ?? 0;
    const end = Math.min(range?.end ?? Number.POSITIVE_INFINITY, size - 1);
    const length = Math.max(0, end - start + 1);
    if (length > IN_PLACE_BYTES) return undefined;
    // Not from the shared pool: a small buffer would keep a whole 8 KiB slab alive.
    const bytes = Buffer.allocUnsafeSlow(length);
    let filled = 0;
    while (filled < length) {
      const read = readSync(fd, bytes, filled, length - filled, start + filled);
      if (read === 0) break;
      filled += read;
    }
    let given = false;
    return new Readable({
      read() {
        if (!given && filled > 0) this.push(bytes.subarray(0, filled));
        given = true;
        this.push(null);
      },
    });
  } finally {
    closeSync(fd);
  }
}

const isPartial = (name: string) => name.startsWith('.') && name.endsWith('.partial');

/** When the file was last written; undefined if it is gone (renamed into place, removed) meanwhile. */
async function modifiedAtOf(path: string): Promise<Date | undefined> {
  try {
    return (await stat(path)).mtime;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

async function* walk(dir: string): AsyncIterable<{ path: string; name: string }> {
  let entries;
  try {
    entries = await opendir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  for await (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (entry.isFile()) yield { path, name: entry.name };
  }
}
