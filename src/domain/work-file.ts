// A batch's work file: its input lines laid out in the order they are to run (prefix-aware order),
// each record carrying the line's number in the input file, so outcomes keep their input lines.

/** One record: the input line's number, a tab, the line as it was (JSON never holds a raw tab before its first brace). */
export const workRecord = (line: number, text: string): string => `${line}\t${text}\n`;

/** Bytes of a record whose line text is `textBytes` long, without building it. */
export const workRecordBytes = (line: number, textBytes: number): number => String(line).length + 1 + textBytes + 1;

/** A record (without its line ending) back into the input line's number and text. */
export function parseWorkRecord(record: string): { number: number; text: string } {
  const tab = record.indexOf('\t');
  const number = tab > 0 ? Number(record.slice(0, tab)) : NaN;
  if (!Number.isSafeInteger(number) || number < 1) throw new Error('malformed work file record');
  return { number, text: record.slice(tab + 1) };
}
