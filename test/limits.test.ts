import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ADMIN_TOKEN, DIALECTS, startTestApp, type TestApp } from './helpers/app.js';
import {
  BASELINE_RECORD_LIMIT,
  BODY_LIMIT,
  COMMENTARY_LIMIT,
  ENRICHMENT_REQUEST_LIMIT,
  FAILURE_MESSAGE_LIMIT,
  JSON_LIMITS,
  LLM_RESPONSE_LIMIT,
  NODE_PAGE,
  LIST_PAGE,
  EVENT_PAGE,
  RECORD_PAGE,
  TEXT_LIMITS,
  truncateUtf8,
} from '../src/limits.js';
import { baselineSchema } from '../src/baselines/schema.js';

/** A string of `bytes` bytes of UTF-8 JSON text for an object `{"k": "..."}`. */
const objectOfBytes = (bytes: number) => ({ k: 'x'.repeat(bytes - '{"k":""}'.length) });
/** `count` characters of 4 bytes of UTF-8 each (outside the BMP: two UTF-16 units, one character). */
const wide = (count: number) => '😀'.repeat(count);

const assertFieldRefused = (response: { status: number; body: any }, path: string, label: string) => {
  assert.equal(response.status, 400, `${label}: ${JSON.stringify(response.body)}`);
  assert.equal(response.body.code, 'validation_failed', label);
  assert.ok(
    response.body.errors.some((error: { path: string }) => error.path === path),
    `${label}: ${JSON.stringify(response.body.errors)}`,
  );
};

describe('size limits: one home, documented', () => {
  it('docs/api.md lists every limit with the value src/limits.ts holds', () => {
    const docs = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const section = /## Limits\n([\s\S]*?)\n## /.exec(docs)?.[1] ?? '';
    assert.ok(section, 'docs/api.md has a "## Limits" section');
    const rows = new Map(
      [...section.matchAll(/^\| `([^`]+)` \|[^|]*\| ([\d,]+) (?:characters|bytes)/gm)].map((m) => [m[1]!, Number(m[2]!.replaceAll(',', ''))]),
    );
    const expected: Record<string, number> = {
      body: BODY_LIMIT,
      record: BASELINE_RECORD_LIMIT,
      enrichment_request: ENRICHMENT_REQUEST_LIMIT,
      name: TEXT_LIMITS.name,
      blob_id: TEXT_LIMITS.blob_id,
      notes: TEXT_LIMITS.notes,
      timestamp: TEXT_LIMITS.timestamp,
      pem: TEXT_LIMITS.pem,
      detail: JSON_LIMITS.detail,
      replay: JSON_LIMITS.replay,
      commentary: COMMENTARY_LIMIT,
      error: FAILURE_MESSAGE_LIMIT,
      llm_answer: LLM_RESPONSE_LIMIT,
    };
    for (const [field, value] of Object.entries(expected)) assert.equal(rows.get(field), value, `docs/api.md's limit of ${field}`);
    assert.ok(docs.includes(`(default ${NODE_PAGE.default}, at most ${NODE_PAGE.max})`), "docs/api.md states GET /api/nodes's page sizes");
    assert.ok(docs.includes(`without \`limit\` a page holds ${LIST_PAGE.default}, the most allowed`), "docs/api.md states GET /api/persons's page");
    assert.equal(LIST_PAGE.default, LIST_PAGE.max, 'the persons page without limit is the largest');
    assert.ok(docs.includes(`&limit=<1..${EVENT_PAGE.max}>`), "docs/api.md states GET /api/events's largest page");
    for (const [file, list] of [
      ['enrichment.md', 'matches'],
      ['baselines.md', 'baselines'],
      ['webhook.md', 'webhook/deliveries'],
    ]) {
      const text = readFileSync(new URL(`../../docs/${file}`, import.meta.url), 'utf8');
      assert.ok(text.includes(`1 to ${RECORD_PAGE.max}, ${RECORD_PAGE.default} by default`), `docs/${file} states GET /api/${list}'s page`);
    }
    const baselines = readFileSync(new URL('../../docs/baselines.md', import.meta.url), 'utf8');
    assert.ok(baselines.includes(`at most ${BASELINE_RECORD_LIMIT.toLocaleString('en')} bytes`), "docs/baselines.md states a record's limit");
  });

  it('schemas/baseline.schema.json bounds its free strings as src/limits.ts says', () => {
    const properties = baselineSchema.properties as Record<string, { maxLength?: number }>;
    assert.equal(properties.notes!.maxLength, TEXT_LIMITS.notes);
    assert.equal(properties.timestamp!.maxLength, TEXT_LIMITS.timestamp);
    assert.equal(properties.commit_url!.maxLength, TEXT_LIMITS.url);
  });

  it('cuts text on a character boundary to a byte size, marked', () => {
    assert.equal(truncateUtf8('short', 10), 'short');
    const cut = truncateUtf8(wide(10), 12);
    assert.ok(Buffer.byteLength(cut) <= 12);
    assert.equal(cut, '😀😀…');
    assert.equal(truncateUtf8('abcdef', 6), 'abcdef');
    assert.equal(truncateUtf8('abcdefg', 6), 'abc…');
  });
});

for (const dialect of DIALECTS) {
  describe(`size limits of free-form input (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
      await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
      await app.api('POST', '/api/zones', { id: 'hall', name: 'Hall' });
    });
    after(() => app.cleanup());

    it('the OpenAPI document states each bound', async () => {
      const doc = (await app.api('GET', '/openapi.json')).body;
      const body = (path: string, method: string) => doc.paths[path][method].requestBody.content['application/json'].schema;
      for (const [path, method] of [
        ['/api/persons', 'post'],
        ['/api/zones', 'post'],
        ['/api/bots', 'post'],
        ['/api/tokens', 'post'],
        ['/api/persons/{id}', 'patch'],
      ] as const)
        assert.equal(body(path, method).properties.name.maxLength, TEXT_LIMITS.name, `${method} ${path}`);
      assert.equal(body('/api/matches', 'post').properties.replay['x-max-json-bytes'], JSON_LIMITS.replay);
      assert.match(JSON.stringify(body('/api/events', 'post')), new RegExp(`"x-max-json-bytes":${JSON_LIMITS.detail}`));
      assert.equal(body('/api/baselines', 'post').properties.notes.maxLength, TEXT_LIMITS.notes);
      assert.match(doc.paths['/api/baselines'].post.description, new RegExp(`at most ${BASELINE_RECORD_LIMIT} bytes \\(413`));
      const mqtt = body('/api/settings/integration', 'post').properties.mqtt.properties;
      for (const field of ['ca_cert', 'client_cert', 'client_key']) assert.equal(mqtt[field].maxLength, TEXT_LIMITS.pem, `mqtt.${field}`);
    });

    it('refuses an over-long name with a 400 naming the field, and takes the longest one', async () => {
      const long = 'n'.repeat(TEXT_LIMITS.name + 1);
      for (const [method, url, extra] of [
        ['POST', '/api/persons', {}],
        ['POST', '/api/zones', {}],
        ['POST', '/api/bots', {}],
        ['POST', '/api/tokens', { scope: 'read' }],
        ['PATCH', '/api/persons/ada', {}],
        ['PATCH', '/api/zones/hall', {}],
      ] as const)
        assertFieldRefused(await app.api(method, url, { name: long, ...extra }), '/name', `${method} ${url}`);
      // The longest name in characters is 4 bytes each at most: 4 x the limit in bytes.
      const widest = await app.api('POST', '/api/persons', { name: wide(TEXT_LIMITS.name) });
      assert.equal(widest.status, 201);
      assert.equal(Buffer.byteLength(widest.body.name), 4 * TEXT_LIMITS.name);
    });

    it("refuses an anomaly's detail over its byte limit naming /detail, and stores nothing", async () => {
      const count = async () => (await app.api('GET', '/api/events?limit=1000')).body.events.length;
      const before = await count();
      const over = await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: objectOfBytes(JSON_LIMITS.detail + 1) });
      assertFieldRefused(over, '/detail', 'detail one byte over');
      // Multi-byte characters count as their UTF-8 bytes.
      const wideOver = await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { k: wide(JSON_LIMITS.detail / 4) } });
      assertFieldRefused(wideOver, '/detail', 'detail of 4-byte characters');
      assertFieldRefused(
        await app.api('POST', '/api/events', { type: 'anomaly.detected', blob_id: 'b'.repeat(TEXT_LIMITS.blob_id + 1) }),
        '/blob_id',
        'blob_id',
      );
      assert.equal(await count(), before);
      const fits = await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: objectOfBytes(JSON_LIMITS.detail) });
      assert.equal(fits.status, 202);
    });

    it("refuses a baseline's over-long notes or timestamp naming the field", async () => {
      const run = { commit_sha: 'a1b2c3d', timestamp: '2026-11-21T22:00:00.000Z', subject_geomean: 0.5, grep_1000_mean_ms: 40 };
      assertFieldRefused(await app.api('POST', '/api/baselines', { ...run, notes: 'n'.repeat(TEXT_LIMITS.notes + 1) }), '/notes', 'notes');
      const longTime = `2026-11-21T22:00:00.${'0'.repeat(TEXT_LIMITS.timestamp)}Z`;
      assertFieldRefused(await app.api('POST', '/api/baselines', { ...run, timestamp: longTime }), '/timestamp', 'timestamp');
      assert.equal((await app.api('POST', '/api/baselines', { ...run, notes: 'n'.repeat(TEXT_LIMITS.notes) })).status, 201);
    });

    it('refuses a baseline record over its size as sent with a 413, and takes the longest one the schema accepts, escaped', async () => {
      const count = async () => (await app.api('GET', '/api/baselines?limit=500')).body.length;
      const before = await count();
      const run = JSON.stringify({ commit_sha: 'a1b2c3d', timestamp: '2026-11-21T22:00:00.000Z', subject_geomean: 0.5, grep_1000_mean_ms: 40 });
      const padded = (bytes: number) => run.slice(0, -1) + ' '.repeat(bytes - run.length) + '}';
      const over = await app.api('POST', '/api/baselines', padded(BASELINE_RECORD_LIMIT + 1));
      assert.equal(over.status, 413, JSON.stringify(over.body));
      assert.equal(over.body.code, 'payload_too_large');
      assert.match(over.body.detail, new RegExp(`exceeds ${BASELINE_RECORD_LIMIT} bytes`));
      assert.equal(await count(), before, 'nothing stored');
      assert.equal((await app.api('POST', '/api/baselines', padded(BASELINE_RECORD_LIMIT))).status, 201);
      // Every string at its longest, each UTF-16 unit of every key and value written as a \u escape
      // (a character outside the BMP is two: 12 bytes), indented: what a client escaping all it sends writes.
      const longest = {
        commit_sha: 'a'.repeat(40),
        commit_url: `https://${wide(TEXT_LIMITS.url - 'https://'.length)}`,
        timestamp: `2026-11-21T22:00:00.${'0'.repeat(TEXT_LIMITS.timestamp - 21)}Z`,
        subject_geomean: 0.123456789012345,
        alpha_geomean: 0.123456789012345,
        beta_geomean: 0.123456789012345,
        gamma_geomean: 0.123456789012345,
        grep_1000_mean_ms: 123456.789012345,
        throughput_mb_per_sec: 123456.789012345,
        files_per_sec: 123456.789012345,
        total_runtime_sec: 123456.789012345,
        corpus_size: Number.MAX_SAFE_INTEGER,
        notes: wide(TEXT_LIMITS.notes),
      };
      const escapeAll = (text: string) =>
        text
          .split('')
          .map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`)
          .join('');
      const escaped = JSON.stringify(longest, null, 2).replace(/"([^"]*)"/g, (_, inner: string) => `"${escapeAll(inner)}"`);
      assert.ok(Buffer.byteLength(escaped) <= BASELINE_RECORD_LIMIT, `${Buffer.byteLength(escaped)} bytes`);
      const stored = await app.api('POST', '/api/baselines', escaped);
      assert.equal(stored.status, 201, JSON.stringify(stored.body).slice(0, 300));
      assert.deepEqual(stored.body.record, longest);
    });

    it('answers an enrichment request body over its limit 413 before anything reads it (outside review: 50 ms of CPU each, rate limited or not)', async () => {
      const over = await app.api('POST', '/api/request-enrichment', `{"match_id":"m","pad":"${'x'.repeat(ENRICHMENT_REQUEST_LIMIT)}"}`, { authorization: '' });
      assert.equal(over.status, 413, JSON.stringify(over.body));
      assert.match(over.body.detail, new RegExp(`exceeds ${ENRICHMENT_REQUEST_LIMIT} bytes`));
    });

    it('refuses a replay over its byte limit naming /replay', async () => {
      const replay = { players: ['a', 'b'], title: 't'.repeat(JSON_LIMITS.replay) };
      assertFieldRefused(await app.api('POST', '/api/matches', { id: 'big', status: 'completed', replay }), '/replay', 'POST replay');
      assert.equal((await app.api('POST', '/api/matches', { id: 'small', status: 'completed', replay: { players: ['a'] } })).status, 201);
      assertFieldRefused(await app.api('PATCH', '/api/matches/small', { replay }), '/replay', 'PATCH replay');
    });

    it('answers a body over the global limit with 413', async () => {
      for (const type of ['application/json', 'application/json; charset=utf-8']) {
        const response = await app.http.inject({
          method: 'POST',
          url: '/api/persons',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': type },
          payload: 'x'.repeat(BODY_LIMIT + 1),
        });
        assert.equal(response.statusCode, 413, type);
        assert.equal(JSON.parse(response.body).code, 'payload_too_large', type);
      }
    });
  });

  describe(`zone events have a bounded size (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.cleanup());

    it('an entry into a crowded zone carries the count, not the occupant list; the zone and MQTT state keep the list', async () => {
      await app.api('POST', '/api/zones', { id: 'hall', name: 'Hall' });
      await app.api('POST', '/api/zones', { id: 'den', name: 'Den' });
      const people = 60;
      for (let i = 0; i < people; i++) {
        await app.api('POST', '/api/persons', { id: `person-${String(i).padStart(3, '0')}`, name: `Person ${i}` });
        await app.api('POST', '/api/events', { type: 'zone.entry', person: `person-${String(i).padStart(3, '0')}`, zone: 'hall' });
      }
      const history = (await app.api('GET', '/api/events?order=desc&limit=5')).body.events;
      const entry = history.find((event: { event_type: string }) => event.event_type === 'zone.entry');
      assert.deepEqual(entry.detail, { from_zone: null, already_inside: false, count: people });
      const moved = await app.api('POST', '/api/events', { type: 'zone.entry', person: 'person-000', zone: 'den' });
      assert.deepEqual(moved.body.event.detail, { from_zone: 'hall', already_inside: false, count: 1 });
      const exits = (await app.api('GET', '/api/events?order=desc&limit=5')).body.events.filter(
        (event: { event_type: string }) => event.event_type === 'zone.exit',
      );
      assert.deepEqual(exits[0].detail, { reason: 'entered_other_zone', to_zone: 'den', count: people - 1 });
      // Every zone event's stored text stays small however many people are in the zone.
      const rows = await app.database.db.selectFrom('events').select('payload').execute();
      for (const row of rows) assert.ok(Buffer.byteLength(String(row.payload)) < 400, String(row.payload));
      assert.equal((await app.api('GET', '/api/zones/hall')).body.occupants.length, people - 1);

      await app.api('DELETE', '/api/zones/hall');
      const deleted = (await app.api('GET', '/api/events?order=desc&limit=1')).body.events[0];
      assert.equal(deleted.event_type, 'zone.deleted');
      assert.deepEqual(deleted.detail, { name: 'Hall', count: people - 1 });
    });
  });
}
