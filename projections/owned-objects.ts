import { type Principal, maySee, ownerOf } from '../src/domain/principal.js';
import type { BatchRow, BatchesQueries } from './batches-projection.js';
import type { FileListQuery, FileRow, FilesQueries } from './files-projection.js';
import type { HistoryPage, HistoryQueries } from './history-projection.js';

/**
 * The one seam between who asks and what the read models hold: the API's routes read batches,
 * files and their histories only through here, and every method takes the principal. With
 * accounts off the open principal sees everything (the spec's `/v1`); an account sees only the
 * objects it owns, and another account's object is answered exactly as an id never issued is
 * (the same query, the same not-found), so nothing tells the two apart.
 */
export class OwnedObjects {
  constructor(private readonly queries: { batches: BatchesQueries; files: FilesQueries; history: HistoryQueries }) {}

  batch(principal: Principal, batchId: string): BatchRow | undefined {
    const row = this.queries.batches.get(batchId);
    return row && maySee(principal, row.account_id) ? row : undefined;
  }

  /** Newest first; undefined when `after` is not a batch of this principal's. */
  batches(principal: Principal, limit: number, after?: string): { data: BatchRow[]; hasMore: boolean } | undefined {
    return this.queries.batches.list(limit, after, ownerOf(principal));
  }

  /** The errors of a batch this seam handed out (a row comes only from batch() or batches(), so it is the principal's). */
  batchErrors(row: BatchRow): ReturnType<BatchesQueries['errors']> {
    return this.queries.batches.errors(row.id);
  }

  /** Lines of a batch (one the principal may see: `row` from batch()) per checkpoint and weight sync. */
  batchServedBy(row: BatchRow): ReturnType<BatchesQueries['servedBy']> {
    return this.queries.batches.servedBy(row.id);
  }

  /** An active, unexpired file of the principal's. */
  file(principal: Principal, fileId: string, now: number): FileRow | undefined {
    const row = this.queries.files.get(fileId, now);
    return row && maySee(principal, row.account_id) ? row : undefined;
  }

  /** Throws UnknownCursorError when `after` is not a file of this principal's. */
  files(principal: Principal, query: FileListQuery, now: number): { data: FileRow[]; hasMore: boolean } {
    return this.queries.files.list(query, now, ownerOf(principal));
  }

  /** Whether the subject (`batch:<id>`, `file:<id>`) is the principal's and has a history (and `after` is one of its events). */
  knowsHistory(principal: Principal, subject: string, after?: string): boolean {
    return this.ownsSubject(principal, subject) && this.queries.history.knows(subject, after);
  }

  /** A page of the subject's history; undefined when it is not the principal's, has none, or `after` is not one of its events. */
  async history(principal: Principal, subject: string, limit: number, after?: string, withoutLines = false): Promise<HistoryPage | undefined> {
    return this.ownsSubject(principal, subject) ? this.queries.history.page(subject, limit, after, withoutLines) : undefined;
  }

  private ownsSubject(principal: Principal, subject: string): boolean {
    if (principal.kind === 'open') return true;
    const colon = subject.indexOf(':');
    const kind = subject.slice(0, colon);
    const id = subject.slice(colon + 1);
    // A deleted or expired file's history stays its owner's.
    if (kind === 'file') return this.queries.files.ownerOf(id) === principal.accountId;
    if (kind === 'batch') return this.queries.batches.get(id)?.account_id === principal.accountId;
    return false;
  }
}
