/** The highest code point spool-tiny prints: planes 0–3 (the others are unassigned, tags or private use). */
const MAX_CODE_POINT = 0x3ffff;

/**
 * How many printable code points lie below each code point: a code point is printable unless it
 * is a control, format, surrogate, private-use or unassigned one (Unicode's category C, as this
 * Node's ICU knows it), or U+FFFD. Tab and newline are allowed besides. Built once, on first use
 * (about 30 ms, 1 MiB).
 */
let printableBelow: Int32Array | undefined;

function table(): Int32Array {
  if (printableBelow) return printableBelow;
  const below = new Int32Array(MAX_CODE_POINT + 2);
  const other = /\p{C}/u;
  for (let point = 0; point <= MAX_CODE_POINT; point++) {
    const printable = point === 0x09 || point === 0x0a || (point !== 0xfffd && !other.test(String.fromCodePoint(point)));
    below[point + 1] = below[point]! + (printable ? 1 : 0);
  }
  printableBelow = below;
  return below;
}

/** Whether a printable code point lies in [low, high]. */
function anyPrintable(low: number, high: number): boolean {
  const from = Math.max(0, low);
  const to = Math.min(MAX_CODE_POINT, high);
  if (from > to) return false;
  const below = table();
  return below[to + 1]! - below[from]! > 0;
}

/** A lead byte's sequence length and the bits of the code point it carries. */
function lead(byte: number): { continuations: number; bits: number; least: number } | undefined {
  if (byte >= 0xc2 && byte <= 0xdf) return { continuations: 1, bits: byte & 0x1f, least: 0x80 };
  if (byte >= 0xe0 && byte <= 0xef) return { continuations: 2, bits: byte & 0x0f, least: 0x800 };
  if (byte >= 0xf0 && byte <= 0xf4) return { continuations: 3, bits: byte & 0x07, least: 0x10000 };
  return undefined;
}

/**
 * Which byte tokens spool-tiny may sample next so that what it prints is valid, printable UTF-8:
 * a byte is allowed when some printable character (or tab, newline) still begins with the bytes
 * of the character under way and it, and when the tokens left can finish that character. Overlong
 * forms and surrogates have no printable completion, so they never begin. The end of text is
 * allowed only between characters.
 */
export class PrintableText {
  /** Continuation bytes still to come for the character begun. */
  private pending = 0;
  /** The code point's bits so far. */
  private bits = 0;
  /** The least code point the character's length may encode (no overlong forms). */
  private least = 0;

  /** Whether `byte` may come next with `left` tokens left (this one included). */
  allowsByte(byte: number, left: number): boolean {
    if (this.pending > 0) {
      if (byte < 0x80 || byte > 0xbf) return false;
      const rest = 6 * (this.pending - 1);
      const low = ((this.bits << 6) | (byte & 0x3f)) * 2 ** rest;
      return anyPrintable(Math.max(low, this.least), low + 2 ** rest - 1);
    }
    if (byte < 0x80) return anyPrintable(byte, byte);
    const begun = lead(byte);
    if (!begun || begun.continuations >= left) return false;
    const low = begun.bits * 2 ** (6 * begun.continuations);
    return anyPrintable(Math.max(low, begun.least), low + 2 ** (6 * begun.continuations) - 1);
  }

  /** Whether the text may end here. */
  get atCharacterBoundary(): boolean {
    return this.pending === 0;
  }

  accept(byte: number): void {
    if (this.pending > 0) {
      this.pending -= 1;
      this.bits = (this.bits << 6) | (byte & 0x3f);
      return;
    }
    const begun = lead(byte);
    if (!begun) return;
    this.pending = begun.continuations;
    this.bits = begun.bits;
    this.least = begun.least;
  }
}
