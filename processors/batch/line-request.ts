import { findJsonMembers } from '../../src/domain/json-members.js';

/** A batch line's request as the input file holds it. */
export interface LineRequest {
  readonly custom_id: string;
  /** Parsed where it is first read (a line whose body goes out as its text may never be). */
  readonly body: Record<string, unknown>;
  /**
   * The body's JSON text as the input holds it, where it can go to the engine as it is: it names
   * the model and asks for no stream (EngineRequest.bodyText). Undefined otherwise.
   */
  readonly bodyText: string | undefined;
}

const QUOTE = 0x22;
const OPEN_BRACE = 0x7b;

const LINE_KEYS = ['custom_id', 'body'] as const;
const BODY_KEYS = ['model', 'stream', 'stream_options'] as const;
/** Where findJsonMembers puts what it finds: one for every line (a line is read whole before the next). */
const lineSpans = new Int32Array(2 * LINE_KEYS.length);
const bodySpans = new Int32Array(2 * BODY_KEYS.length);

/** A line whose body goes out as its text; parsed only if something reads `body` (a class: no getter made per line). */
class LineRequestText implements LineRequest {
  private parsed: Record<string, unknown> | undefined;

  constructor(
    readonly custom_id: string,
    readonly bodyText: string,
  ) {}

  get body(): Record<string, unknown> {
    return (this.parsed ??= JSON.parse(this.bodyText) as Record<string, unknown>);
  }
}

/**
 * A batch line's request from its text. Its body is not parsed where it can be sent as written:
 * an object that names the model as a string and has no `stream` or `stream_options` member (a
 * batch line is answered whole). Every batch line passes here, and a parsed body (every message,
 * every string of it) lived as long as the line waited and ran, only to be written out again.
 * Throws as JSON.parse does for text that is not JSON.
 */
export function lineRequestOf(text: string): LineRequest {
  if (findJsonMembers(text, LINE_KEYS, lineSpans) && text.charCodeAt(lineSpans[0]!) === QUOTE && text.charCodeAt(lineSpans[2]!) === OPEN_BRACE) {
    const bodyStart = lineSpans[2]!;
    const bodyEnd = lineSpans[3]!;
    // A model named as a string (charCodeAt(-1) is NaN where none is), and no stream asked for.
    if (findJsonMembers(text, BODY_KEYS, bodySpans, bodyStart, bodyEnd) && text.charCodeAt(bodySpans[0]!) === QUOTE && bodySpans[2] === -1 && bodySpans[4] === -1) {
      return new LineRequestText(JSON.parse(text.slice(lineSpans[0], lineSpans[1])) as string, text.slice(bodyStart, bodyEnd));
    }
  }
  const parsed = JSON.parse(text) as { custom_id: string; body: Record<string, unknown> };
  return { custom_id: parsed.custom_id, body: parsed.body, bodyText: undefined };
}
