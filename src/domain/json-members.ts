// Where the members of a JSON object's text are, found without parsing it. Pure.
//
// A batch line is read and checked whole when its batch is validated; when it runs, most of it is
// only handed on to an engine as it is. Finding its members' places in the text lets the line's
// body go out as the bytes the input holds, with no object made of it and written out again.

const SPACE = 0x20;
const TAB = 0x09;
const LINE_FEED = 0x0a;
const CARRIAGE_RETURN = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

const isSpace = (code: number): boolean => code === SPACE || code === LINE_FEED || code === CARRIAGE_RETURN || code === TAB;

function skipSpace(text: string, at: number, end: number): number {
  while (at < end && isSpace(text.charCodeAt(at))) at++;
  return at;
}

/** The index after the string whose opening quote is at `at`; -1 when it does not close. */
function skipString(text: string, at: number, end: number): number {
  let from = at + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0 || quote >= end) return -1;
    // Escaped where an odd number of backslashes runs up to it.
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

function hasBackslash(text: string, from: number, to: number): boolean {
  for (let index = from; index < to; index++) if (text.charCodeAt(index) === BACKSLASH) return true;
  return false;
}

/** The index after the value that starts at `at`; -1 where none does. */
function skipValue(text: string, at: number, end: number): number {
  const first = text.charCodeAt(at);
  if (first === QUOTE) return skipString(text, at, end);
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    for (let index = at; index < end; index++) {
      const code = text.charCodeAt(index);
      if (code === QUOTE) {
        const after = skipString(text, index, end);
        if (after < 0) return -1;
        index = after - 1;
      } else if (code === OPEN_BRACE || code === OPEN_BRACKET) depth++;
      else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
        depth--;
        if (depth === 0) return index + 1;
      }
    }
    return -1;
  }
  // A number, true, false or null: up to what may follow a value.
  let index = at;
  while (index < end) {
    const code = text.charCodeAt(index);
    if (code === COMMA || code === CLOSE_BRACE || code === CLOSE_BRACKET || isSpace(code)) break;
    index++;
  }
  return index > at ? index : -1;
}

/**
 * Finds the members named `keys` in the JSON object whose text is `text` (or `text.slice(start,
 * end)`), without making a string or object of its own: the value of `keys[i]` runs from
 * `spans[2i]` to `spans[2i + 1]` (exclusive; both -1 where the object has no such member; the last
 * where it has two, as JSON.parse keeps). False where that is not an object's text as JSON.parse
 * takes it, or where a key is written with an escape (callers then parse the text). Values are
 * skipped, not checked: meant for text JSON.parse has read before (a batch's lines are read whole
 * when it is validated).
 */
export function findJsonMembers(text: string, keys: readonly string[], spans: Int32Array, start = 0, end = text.length): boolean {
  spans.fill(-1, 0, 2 * keys.length);
  let at = skipSpace(text, start, end);
  if (text.charCodeAt(at) !== OPEN_BRACE) return false;
  at = skipSpace(text, at + 1, end);
  if (text.charCodeAt(at) === CLOSE_BRACE) return skipSpace(text, at + 1, end) === end;
  for (;;) {
    if (text.charCodeAt(at) !== QUOTE) return false;
    const keyEnd = skipString(text, at, end);
    if (keyEnd < 0) return false;
    const keyLength = keyEnd - at - 2;
    let wanted = -1;
    for (let index = 0; index < keys.length; index++) {
      const key = keys[index]!;
      if (key.length === keyLength && text.startsWith(key, at + 1)) wanted = index;
    }
    // Another key written with an escape might read as one of `keys`.
    if (wanted < 0 && hasBackslash(text, at + 1, keyEnd - 1)) return false;
    at = skipSpace(text, keyEnd, end);
    if (text.charCodeAt(at) !== COLON) return false;
    const valueStart = skipSpace(text, at + 1, end);
    const valueEnd = skipValue(text, valueStart, end);
    if (valueEnd < 0) return false;
    if (wanted >= 0) {
      spans[2 * wanted] = valueStart;
      spans[2 * wanted + 1] = valueEnd;
    }
    at = skipSpace(text, valueEnd, end);
    const next = text.charCodeAt(at);
    if (next === CLOSE_BRACE) return skipSpace(text, at + 1, end) === end;
    if (next !== COMMA) return false;
    at = skipSpace(text, at + 1, end);
  }
}
