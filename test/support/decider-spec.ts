import * as E from 'fp-ts/lib/Either.js';
import { expect } from 'vitest';
import type { Decider, DomainEvent } from '../../src/domain/decider.js';
import type { Rejection } from '../../src/domain/rejection.js';

/** given(past events).when(command).then(new events | rejection): a decider spec without I/O. */
export function deciderSpec<Command, State, Event extends DomainEvent>(decider: Decider<Command, State, Event>) {
  return {
    given(events: Event[]) {
      const state = events.reduce(decider.evolve, decider.initialState);
      return {
        when(command: Command) {
          const outcome = decider.decide(command, state);
          return {
            then(expected: Event[]) {
              expect(outcome).toEqual(E.right(expected));
            },
            thenRejects(expected: Partial<Rejection>) {
              expect(E.isLeft(outcome)).toBe(true);
              if (E.isLeft(outcome)) expect(outcome.left).toMatchObject(expected);
            },
          };
        },
        thenState(expected: State) {
          expect(state).toEqual(expected);
        },
      };
    },
  };
}
