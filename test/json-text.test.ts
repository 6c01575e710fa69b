import { describe, expect, it } from 'vitest';
import { outputLine } from '../src/domain/batch-output.js';
import { JsonText } from '../src/domain/json-text.js';
import { type LineCompletedData, type LineFailedData, lineOutcomeDataJson, lineOutcomeFields, lineOutcomeFromText } from '../src/domain/line-outcome.js';

// A batch line's answer travels as its JSON text (JsonText) from the engine I/O thread to the
// outcome event and the output file line. Whatever it travels as, what is written must be what
// writing out the parsed answer gives: a chunk rendered while the batch runs and one the finalizer
// renders from the log are put in one output file.

const bodies: unknown[] = [
  { id: 'cmpl-1', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'a "quoted" \u2028 line\nbreak, é, 😀' } }], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } },
  { object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.1, -2.5e-7, 3] }], usage: { prompt_tokens: 4, total_tokens: 4 } },
  { error: { message: 'bad', type: 'invalid_request_error', code: null } },
  [1, 'two', { three: 3 }],
];

const completed = (body: unknown): LineCompletedData => ({ batch_id: 'batch_x', line: 7, custom_id: 'req "7" \u0000', request_id: 'req_7', status_code: 200, body, usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });
const failed = (body: unknown): LineFailedData => ({ batch_id: 'batch_x', line: 8, custom_id: 'req-8', request_id: 'req_8', status_code: 400, body, error: null, usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } });

describe('an answer carried as its JSON text', () => {
  it('renders the same output and error file lines as the parsed answer', () => {
    for (const body of bodies) {
      const text = new JsonText(JSON.stringify(body));
      expect(outputLine('batch_x', 'output', completed(text))).toBe(outputLine('batch_x', 'output', completed(body)));
      expect(outputLine('batch_x', 'error', failed(text))).toBe(outputLine('batch_x', 'error', failed(body)));
      expect(outputLine('batch_x', 'error', completed(text))).toBeUndefined();
    }
  });

  it("writes an outcome event's data that reads back as the parsed answer's, and nothing for a parsed one", () => {
    for (const body of bodies) {
      for (const data of [completed(body), failed(body)]) {
        const json = lineOutcomeDataJson({ ...data, body: new JsonText(JSON.stringify(body)) });
        expect(JSON.parse(json!)).toEqual(JSON.parse(JSON.stringify(data)));
        expect(lineOutcomeDataJson(data)).toBeUndefined();
      }
    }
  });

  it('gives the value itself to JSON.stringify anywhere else (a store that writes its own JSON)', () => {
    for (const body of bodies) expect(JSON.stringify({ data: { body: new JsonText(JSON.stringify(body)) } })).toBe(JSON.stringify({ data: { body } }));
  });

  it("reads an outcome's fields but its body from the text this version writes, and declines any other layout", () => {
    const tricky = { ...completed({ nested: { body: 1 }, text: ',"body":' }), custom_id: 'x,"body":{"a":1}' };
    for (const data of [completed(bodies[0]), failed(bodies[2]), tricky, { ...failed(null), error: { code: 'engine_unavailable', message: 'a ,"body": b' } }]) {
      const { body: _body, ...rest } = data;
      const written = lineOutcomeDataJson({ ...data, body: new JsonText(JSON.stringify(data.body)) })!;
      expect(lineOutcomeFields('error' in data ? 'LineFailed' : 'LineCompleted', written)).toEqual(rest);
      // Earlier versions wrote the body before usage (and error): the fields before it are not all.
      expect(lineOutcomeFields('error' in data ? 'LineFailed' : 'LineCompleted', JSON.stringify(data))).toBeUndefined();
    }
  });

  it("renders a chunk read back from the log with the bytes it had as it ran, the engine's own way of writing numbers kept", () => {
    // Compact as an engine wrote it; JSON.stringify of its value would give other bytes.
    const engineText = '{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1e-05,-0.0,1.50]}],"usage":{"prompt_tokens":4,"total_tokens":4}}';
    for (const data of [completed(new JsonText(engineText)), failed(new JsonText('{"error":{"message":"caf\\u00e9"}}'))]) {
      const type = 'error' in data ? 'LineFailed' : 'LineCompleted';
      const live = outputLine('batch_x', type === 'LineFailed' ? 'error' : 'output', data);
      const readBack = lineOutcomeFromText(type, lineOutcomeDataJson(data)!);
      expect(readBack?.body).toBeInstanceOf(JsonText);
      expect(outputLine('batch_x', type === 'LineFailed' ? 'error' : 'output', readBack!)).toBe(live);
      expect(live).toContain((data.body as JsonText).text);
    }
    // Written by JSON.stringify of parsed data (its body before usage), or unanswered: parse it all.
    expect(lineOutcomeFromText('LineCompleted', JSON.stringify(completed({ a: 1 })))).toBeUndefined();
    expect(lineOutcomeFromText('LineFailed', JSON.stringify(failed(null)))).toBeUndefined();
  });
});
