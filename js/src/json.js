/**
 * JSON parsing that keeps what Python's `json.loads` keeps and `JSON.parse` loses: whether a number was
 * written as an integer (`2`) or as a float (`2.0`, `2e0`). Python's validators refuse `2.0` where an
 * integer is required (`params.k`, `format_version`), so the browser must see the difference to apply the
 * same rules: a number written with a fraction or an exponent whose value is integral is returned as a
 * boxed `Number` object (`typeof` 'object', `valueOf()` the value); every other number is a plain number.
 * Like Python, `NaN`, `Infinity` and `-Infinity` are accepted as numbers (the validators then refuse
 * them) and a repeated key keeps its last value (`strict: true`, for decrypted payloads, refuses both).
 */

export class JsonSyntaxError extends Error {}

export function parseJson(text, { strict = false } = {}) {
  let i = 0;
  const fail = (what) => {
    throw new JsonSyntaxError(`${what} at char ${i}`);
  };
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i += 1;
  };
  const value = (depth) => {
    if (depth > 900) fail('nesting too deep');
    ws();
    const c = text[i];
    if (c === '{') {
      i += 1;
      const obj = {};
      const seen = new Set();
      ws();
      if (text[i] === '}') {
        i += 1;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('Expecting property name enclosed in double quotes');
        const key = string();
        if (strict && seen.has(key)) fail(`duplicate key ${JSON.stringify(key.slice(0, 40))}`);
        seen.add(key);
        ws();
        if (text[i] !== ':') fail("Expecting ':' delimiter");
        i += 1;
        Object.defineProperty(obj, key, { value: value(depth + 1), enumerable: true, writable: true, configurable: true });
        ws();
        if (text[i] === ',') {
          i += 1;
          continue;
        }
        if (text[i] === '}') {
          i += 1;
          return obj;
        }
        fail("Expecting ',' delimiter");
      }
    }
    if (c === '[') {
      i += 1;
      const arr = [];
      ws();
      if (text[i] === ']') {
        i += 1;
        return arr;
      }
      for (;;) {
        arr.push(value(depth + 1));
        ws();
        if (text[i] === ',') {
          i += 1;
          continue;
        }
        if (text[i] === ']') {
          i += 1;
          return arr;
        }
        fail("Expecting ',' delimiter");
      }
    }
    if (c === '"') return string();
    for (const [word, result] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return result;
      }
    }
    for (const [word, result] of [['NaN', NaN], ['Infinity', Infinity], ['-Infinity', -Infinity]]) {
      if (text.startsWith(word, i)) {
        if (strict) fail(`${word} is not JSON`);
        i += word.length;
        return result;
      }
    }
    const match = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?/.exec(text.slice(i, i + 400));
    if (!match) fail('Expecting value');
    i += match[0].length;
    const number = Number(match[0]);
    // eslint-disable-next-line no-new-wrappers
    return (match[1] || match[2]) && Number.isInteger(number) ? new Number(number) : number;
  };
  const string = () => {
    i += 1;
    let out = '';
    for (;;) {
      const j = i;
      while (i < text.length && text[i] !== '"' && text[i] !== '\\' && text.charCodeAt(i) >= 0x20) i += 1;
      out += text.slice(j, i);
      if (i >= text.length) fail('Unterminated string');
      const c = text[i];
      if (c === '"') {
        i += 1;
        return out;
      }
      if (c !== '\\') fail('Invalid control character');
      const e = text[i + 1];
      const simple = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
      if (e in simple) {
        out += simple[e];
        i += 2;
      } else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
        out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
        i += 6;
      } else fail('Invalid \\escape');
    }
  };
  const result = value(0);
  ws();
  if (i !== text.length) fail('Extra data');
  return result;
}

/** The plain value of a parsed number (boxed or not), else the value unchanged. */
export const unbox = (x) => (x instanceof Number ? x.valueOf() : x);

/** A JSON integer as Python sees one: a number written without fraction or exponent (not a boolean). */
export const isJsonInt = (x) => typeof x === 'number' && Number.isInteger(x);

/** A JSON number (int or float, boxed or not), not a boolean. */
export const isJsonNumber = (x) => typeof x === 'number' || x instanceof Number;

export const isPlainObject = (x) => x !== null && typeof x === 'object' && !Array.isArray(x) && !(x instanceof Number);
