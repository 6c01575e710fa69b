// A JSON value kept as its compact text (no whitespace outside its strings). Pure.

/**
 * A value carried as its JSON text rather than parsed: a batch line's answer, from the engine
 * exchange to the outcome event and the output file line, which would otherwise be parsed once
 * and written out twice on the main loop. Whoever writes it into JSON of their own splices the
 * text in (batch-output.ts, line-outcome.ts); JSON.stringify anywhere else still gives the value
 * itself (toJSON), only slower.
 */
export class JsonText {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    return JSON.parse(this.text);
  }
}

