import type { FieldError } from './problem.js';

/**
 * Deepest nesting a JSON body may have. Real payloads (event details, match replays, baseline
 * metadata) stay within a handful of levels; a bound keeps every later walk over a body (schema
 * validation, canonical JSON, the database's JSON functions) cheap and far from the stack's limit.
 */
export const MAX_JSON_DEPTH = 64;

/** JSON Pointer escaping (RFC 6901) for one path segment. */
const pointerSegment = (key: string | number) => String(key).replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * The first violation of the shape every JSON body must have, or undefined: no string or key with a
 * NUL character (PostgreSQL's text and jsonb cannot hold one, so a PostgreSQL install would fail
 * where SQLite stored it) or an unpaired surrogate (SQLite would store invalid UTF-8, PostgreSQL a
 * replacement character: not what was acknowledged), no `__proto__` or `constructor.prototype` key and
 * no nesting deeper than MAX_JSON_DEPTH. Only the first is reported:
 * one bad value is enough to refuse the body, and a 5,000-level body would otherwise name 5,000.
 */
export function jsonShapeError(value: unknown, prefix = ''): FieldError | undefined {
  return walk(value, prefix, 0);
}

/** A UTF-16 surrogate without its pair: no UTF-8 encoding exists, so each database stores something else. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** What is wrong with a string or property name in a body, or null. */
function textError(text: string): string | null {
  if (text.includes('\u0000')) return 'a NUL character';
  if (LONE_SURROGATE.test(text)) return 'an unpaired surrogate (\\uD800-\\uDFFF), which is not Unicode text';
  return null;
}

function walk(value: unknown, path: string, depth: number): FieldError | undefined {
  if (typeof value === 'string') {
    const error = textError(value);
    return error ? { path: path || '/', message: `must not contain ${error}` } : undefined;
  }
  if (value === null || typeof value !== 'object') return undefined;
  if (depth >= MAX_JSON_DEPTH) return { path: path || '/', message: `is nested deeper than ${MAX_JSON_DEPTH} levels` };
  for (const [key, item] of Object.entries(value)) {
    const keyError = textError(key);
    if (keyError) return { path: path || '/', message: `has a property name with ${keyError}` };
    // Prototype poisoning (the JSON parser refuses these; named here so the 400 says where).
    if (key === '__proto__' || (key === 'constructor' && item !== null && typeof item === 'object' && Object.hasOwn(item, 'prototype')))
      return { path: `${path}/${key}`, message: 'is a property name that is not accepted (it would reach the prototype of an object)' };
    const error = walk(item, `${path}/${pointerSegment(key)}`, depth + 1);
    if (error) return error;
  }
  return undefined;
}
