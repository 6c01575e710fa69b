import { describe, expect, it } from 'vitest';
import { findJsonMembers } from '../src/domain/json-members.js';
import { lineRequestOf } from '../processors/batch/line-request.js';
import { type EngineRequest, withBody } from '../src/engine/engine.js';

// A batch line's body goes to its engine as the input file holds it, found in the line's text
// without parsing it. What is found must be what JSON.parse reads, for every way of writing JSON.

/** The values findJsonMembers finds for `keys`, parsed; undefined where it declines the text. */
const found = (text: string, keys: readonly string[], start?: number, end?: number) => {
  const spans = new Int32Array(2 * keys.length);
  if (!findJsonMembers(text, keys, spans, start, end)) return undefined;
  return Object.fromEntries(keys.flatMap((key, index) => (spans[2 * index]! < 0 ? [] : [[key, JSON.parse(text.slice(spans[2 * index], spans[2 * index + 1])) as unknown]])));
};

describe('the members of an object found in its text', () => {
  it('finds each value where JSON.parse reads it, whatever the strings, nesting and spacing', () => {
    const objects: Array<Record<string, unknown>> = [
      {},
      { a: 1 },
      { custom_id: 'x', body: { model: 'm', messages: [{ role: 'user', content: 'braces } { ] [ and "quotes", a backslash \\ at the end\\' }] } },
      { n: -1.5e-7, t: true, f: false, z: null, s: '', arr: [[], {}, [1, [2, { three: '}' }]]] },
      { 'é 😀': 'ünïcode \u2028 \u0000', k: '\\"' },
    ];
    for (const value of objects) {
      for (const text of [JSON.stringify(value), JSON.stringify(value, null, 2), ` \t${JSON.stringify(value, null, '\t')}\r\n`]) {
        expect(found(text, [...Object.keys(value), 'absent'])).toEqual(value);
        // Only the keys asked for.
        expect(found(text, ['absent'])).toEqual({});
      }
    }
  });

  it('declines what is not an object, text that does not end where the object does, and another key written with an escape', () => {
    for (const text of ['[1,2]', '"s"', '12', 'null', '', '{"a":1', '{"a":1}x', '{"a" 1}', '{"a":1,}', '{"a":"unclosed}', '{"\\u0062ody":1}']) {
      expect(found(text, ['a', 'body']), text).toBeUndefined();
    }
  });

  it('takes the last of a key written twice, as JSON.parse does, and reads within a range of a longer text', () => {
    expect(found('{"a":1,"b":2,"a":3}', ['a', 'b'])).toEqual({ a: 3, b: 2 });
    const text = '{"custom_id":"c","body":{"model":"m","input":"x"}}';
    const spans = new Int32Array(2);
    expect(findJsonMembers(text, ['body'], spans)).toBe(true);
    expect(found(text, ['model', 'input', 'custom_id'], spans[0], spans[1])).toEqual({ model: 'm', input: 'x' });
  });
});

describe("a batch line's request", () => {
  it("keeps a body that names its model and asks for no stream as the input's bytes, parsed only when read", () => {
    // Numbers and escapes as a client wrote them: JSON.stringify of the parsed body would give other bytes.
    const bodyText = '{ "model": "m", "messages": [{"role": "user", "content": "caf\\u00e9 \\/ 1.50"}], "temperature": 1.0 }';
    const request = lineRequestOf(`{"custom_id": "req-\\"1\\"", "method": "POST", "url": "/v1/chat/completions", "body": ${bodyText}}`);
    expect(request.custom_id).toBe('req-"1"');
    expect(request.bodyText).toBe(bodyText);
    expect(request.body).toEqual(JSON.parse(bodyText));
    expect(request.body).toBe(request.body);
  });

  it('parses the body where it cannot go as written: no model, a model that is not a string, a stream asked for', () => {
    for (const body of [{ messages: [] }, { model: null, messages: [] }, { model: 'm', stream: false }, { model: 'm', stream_options: { include_usage: true } }]) {
      const request = lineRequestOf(JSON.stringify({ custom_id: 'c', method: 'POST', url: '/v1/chat/completions', body }));
      expect(request.bodyText).toBeUndefined();
      expect(request.body).toEqual(body);
    }
  });

  it('takes the last of a key written twice, as JSON.parse does', () => {
    const request = lineRequestOf('{"custom_id":"first","body":{"model":"a"},"custom_id":"second","body":{"model":"b","input":"x"}}');
    expect(request.custom_id).toBe('second');
    expect(request.bodyText).toBe('{"model":"b","input":"x"}');
  });

  it('throws as JSON.parse does for a line that is not JSON', () => {
    expect(() => lineRequestOf('{"custom_id": "c", "body": {')).toThrow(SyntaxError);
  });
});

describe('a request that goes out with another body', () => {
  const bodyText = '{"model":"m","messages":[],"temperature":1.0}';
  const request: EngineRequest = { endpoint: '/v1/chat/completions', body: JSON.parse(bodyText) as Record<string, unknown>, bodyText, serviceClass: 'batch', deadline: 5 };

  it('is the request itself, its text kept, where nothing replaces its body or adds to it', () => {
    expect(withBody(request, undefined, undefined)).toBe(request);
    expect(withBody(request, request.body, undefined)).toBe(request);
  });

  it('is a copy without the text of the body it no longer carries, the rest of the request kept', () => {
    const fetched = { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' } }] }] };
    expect(withBody(request, fetched, undefined)).toEqual({ ...request, body: fetched, bodyText: undefined });
    expect(withBody(request, undefined, { priority: 3 })).toEqual({ ...request, body: { ...request.body, priority: 3 }, bodyText: undefined });
    expect(withBody(request, fetched, { priority: 3 })).toEqual({ ...request, body: { ...fetched, priority: 3 }, bodyText: undefined });
  });
});
