import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { jsonShapeError, MAX_JSON_DEPTH } from '../src/http/input-shape.js';
import { NOT_BLANK } from '../src/http/schemas.js';
import { nameKey } from '../src/presence/transitions.js';

const nested = (depth: number): unknown => (depth === 0 ? 1 : { a: nested(depth - 1) });

describe('the shape every JSON input must have', () => {
  it('passes ordinary bodies, real surrogate pairs and the deepest nesting allowed', () => {
    for (const value of [
      { name: 'Ada 😀', tags: ['a', 'b'], detail: { x: [1, { y: null }] } },
      'text',
      42,
      null,
      [],
      nested(MAX_JSON_DEPTH),
      { constructor: 'a string', 'a/b~c': 1 },
    ])
      assert.equal(jsonShapeError(value), undefined, JSON.stringify(value));
  });

  it('names the first violation with its JSON pointer (RFC 6901 escapes), after the prefix', () => {
    const cases: Array<[unknown, string, string, RegExp]> = [
      [{ name: 'Ad\u0000a' }, '', '/name', /NUL/],
      [{ detail: { 'a/b': { '~x': ['ok', 'x\u0000'] } } }, '', '/detail/a~1b/~0x/1', /NUL/],
      [{ detail: { 'k\u0000': 1 } }, '', '/detail', /property name with a NUL/],
      [{ name: 'a\udfffb' }, '', '/name', /unpaired surrogate/],
      [{ name: '\ude00\ud83d' }, '', '/name', /unpaired surrogate/],
      [{ detail: { '\udc00': 1 } }, '', '/detail', /property name with an unpaired surrogate/],
      ['\u0000', '', '/', /NUL/],
      [{ head: 'a\u0000b' }, 'querystring:', 'querystring:/head', /NUL/],
      // A violation at the root of a prefixed input is named by the prefix alone (the root's pointer is empty).
      [{ 'a\u0000': '1' }, 'querystring:', 'querystring:', /property name with a NUL/],
      [{ '\ud800': 'x' }, 'params:', 'params:', /property name with an unpaired surrogate/],
      ['\u0000', 'querystring:', 'querystring:', /NUL/],
      [JSON.parse('{"x":{"__proto__":{"admin":true}}}'), '', '/x/__proto__', /prototype/],
      [{ detail: { constructor: { prototype: { x: 1 } } } }, '', '/detail/constructor', /prototype/],
      [{ first: 'x\u0000', second: 'y\u0000' }, '', '/first', /NUL/],
      [{ detail: nested(MAX_JSON_DEPTH + 10) }, '', '/detail' + '/a'.repeat(MAX_JSON_DEPTH - 1), /deeper than 64/],
    ];
    for (const [value, prefix, path, message] of cases) {
      const error = jsonShapeError(value, prefix);
      assert.equal(error?.path, path, JSON.stringify(value));
      assert.match(error.message, message);
    }
  });
});

describe('the name pattern (NOT_BLANK) as clients read it from the OpenAPI document', () => {
  it("spells out its characters (no \\p{...}, which Python's re and jsonschema cannot compile) and matches what Unicode calls invisible", () => {
    assert.doesNotMatch(NOT_BLANK, /\\p\{/);
    const visible = new RegExp(NOT_BLANK, 'u');
    const invisible = /[\s\p{Cc}\p{Default_Ignorable_Code_Point}\u2800\ufff9-\ufffb]/u;
    const differ: string[] = [];
    for (let code = 0; code <= 0xffff; code++) {
      if (code >= 0xd800 && code <= 0xdfff) continue;
      const character = String.fromCharCode(code);
      if (visible.test(character) === invisible.test(character)) differ.push(code.toString(16));
    }
    assert.deepEqual(differ, []);
  });
  it("is the names' own rule: a character is blank exactly when a name's key (presence's nameKey) drops it", () => {
    const visible = new RegExp(NOT_BLANK, 'u');
    const differ: string[] = [];
    for (let code = 0; code <= 0xffff; code++) {
      if (code >= 0xd800 && code <= 0xdfff) continue;
      const character = String.fromCharCode(code);
      if (visible.test(character) !== (nameKey(character) !== '')) differ.push(code.toString(16));
    }
    assert.deepEqual(differ, []);
  });
});
