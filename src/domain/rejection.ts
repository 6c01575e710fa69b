import * as E from 'fp-ts/lib/Either.js';

/** Why a command was refused. The HTTP layer maps the kind to a status code. */
export type RejectionKind = 'not_found' | 'conflict' | 'invalid' | 'precondition_failed' | 'invalid_state';

export interface Rejection {
  readonly kind: RejectionKind;
  readonly message: string;
  /** The request field the rejection is about, when there is one. */
  readonly param?: string;
}

export function reject<A = never>(kind: RejectionKind, message: string, param?: string): E.Either<Rejection, A> {
  return E.left(param === undefined ? { kind, message } : { kind, message, param });
}
