import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted (by UTF-16 code unit, recursively) and no whitespace, so equal
 * content always gives equal text whatever order its keys were written in. Array order is kept.
 * Object members whose value is `undefined` are left out, as `JSON.stringify` does; a value JSON
 * cannot carry (a non-finite number, a function, a bigint, `undefined` at the top) is refused.
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`canonical JSON: ${value} is not a JSON number`);
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) {
        return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`;
      }
      const record = value as Record<string, unknown>;
      const members = Object.keys(record)
        .filter((key) => record[key] !== undefined)
        .sort()
        .map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`);
      return `{${members.join(',')}}`;
    }
    default:
      throw new TypeError(`canonical JSON: a ${typeof value} is not a JSON value`);
  }
}

/** SHA-256 of a UTF-8 string, as 64 lower-case hex characters. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The content address of a JSON value: SHA-256 of its canonical JSON. */
export function contentAddress(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
