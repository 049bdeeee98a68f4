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
  const error = walk(value, 0);
  // The root's pointer is empty: a violation there is named by the prefix, or "/" without one.
  return error && { path: error.path ? prefix + error.path : prefix || '/', message: error.message };
}

/** A UTF-16 surrogate, paired or not: V8 answers at once for one-byte text, which holds none. */
const SURROGATE = /[\uD800-\uDFFF]/;
/** A UTF-16 surrogate without its pair: no UTF-8 encoding exists, so each database stores something else. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** What is wrong with a string or property name in a body, or null. */
function textError(text: string): string | null {
  if (text.includes('\u0000')) return 'a NUL character';
  if (SURROGATE.test(text) && LONE_SURROGATE.test(text)) return 'an unpaired surrogate (\\uD800-\\uDFFF), which is not Unicode text';
  return null;
}

/**
 * The violation found in `value`, with its path relative to `value`: the path is built only on the
 * way back from a violation, so a valid body (nearly every one) costs no string work per key.
 */
function walk(value: unknown, depth: number): FieldError | undefined {
  if (typeof value === 'string') {
    const error = textError(value);
    return error ? { path: '', message: `must not contain ${error}` } : undefined;
  }
  if (value === null || typeof value !== 'object') return undefined;
  if (depth >= MAX_JSON_DEPTH) return { path: '', message: `is nested deeper than ${MAX_JSON_DEPTH} levels` };
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const item = (value as Record<string, unknown>)[key];
    const keyError = textError(key);
    if (keyError) return { path: '', message: `has a property name with ${keyError}` };
    // Prototype poisoning (the JSON parser refuses these; named here so the 400 says where).
    if (key === '__proto__' || (key === 'constructor' && item !== null && typeof item === 'object' && Object.hasOwn(item, 'prototype')))
      return { path: `/${key}`, message: 'is a property name that is not accepted (it would reach the prototype of an object)' };
    const error = walk(item, depth + 1);
    if (error) return { path: `/${pointerSegment(key)}${error.path}`, message: error.message };
  }
  return undefined;
}
