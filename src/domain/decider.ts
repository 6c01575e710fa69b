// The vocabulary every aggregate speaks: a decider turns a command and the state folded from past
// events into new events, or a rejection. Pure; the application layer does the loading and appending.
import type * as E from 'fp-ts/lib/Either.js';
import type { Rejection } from './rejection.js';

export interface DomainEvent {
  readonly type: string;
  readonly data: object;
}

export interface Decider<Command, State, Event extends DomainEvent> {
  decide(command: Command, state: State): E.Either<Rejection, Event[]>;
  evolve(state: State, event: Event): State;
  readonly initialState: State;
}
