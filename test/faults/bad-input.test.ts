import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.js';

/** Anything JSON can carry, plus the shapes that break naive code: deep nesting, huge strings, odd keys. */
const anyJson = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc.dictionary(
    fc.constantFrom(
      'name',
      'id',
      'type',
      'person',
      'zone',
      'mode',
      'quality',
      'match_id',
      'status',
      'mqtt',
      'webhook',
      'commit_sha',
      'timestamp',
      '__proto__',
      'constructor',
    ),
    fc.jsonValue({ maxDepth: 3 }),
  ),
  fc.record({
    mqtt: fc.dictionary(
      fc.constantFrom(
        'enabled',
        'broker_url',
        'password',
        'ca_cert',
        'client_cert',
        'client_key',
        'client_key_passphrase',
        'topic_root',
        'discovery_prefix',
        'tls',
      ),
      fc.jsonValue({ maxDepth: 2 }),
    ),
  }),
  fc.record({
    type: fc.constantFrom('zone.entry', 'zone.exit', 'fall.detected', 'fall.cleared', 'anomaly.detected'),
    person: fc.string(),
    zone: fc.string(),
    detail: fc.jsonValue(),
  }),
);
const pathSegment = fc.oneof(
  fc.string({ maxLength: 80 }),
  fc.constantFrom('a+b', '#', 'a/b', '..', '%00', '%E0%A4%A', 'x'.repeat(300), 'x'.repeat(5000), 'ümlaut', '1', 'latest', '-1', '0'),
);
const query = fc.dictionary(
  fc.constantFrom('limit', 'after', 'before', 'base', 'head', 'threshold', 'order', 'x'),
  fc.oneof(fc.string({ maxLength: 20 }), fc.integer().map(String)),
);

describe('bad input never gets a 5xx and never changes state', () => {
  let app: TestApp;
  let routes: { method: string; path: string }[];

  before(async () => {
    app = await startTestApp('sqlite');
    await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
    await app.api('POST', '/api/zones', { id: 'hall', name: 'Hall' });
    const openapi = (await app.api('GET', '/openapi.json', undefined, { authorization: '' })).body;
    // The event stream never ends by design; it has its own tests.
    routes = Object.entries(openapi.paths as Record<string, Record<string, unknown>>)
      .flatMap(([path, methods]) => Object.keys(methods).map((method) => ({ method: method.toUpperCase(), path })))
      .filter((route) => route.path !== '/api/events/stream');
  });
  after(() => app.cleanup());

  const snapshot = async () => {
    const [persons, zones, mode, events, baselines, bots, matches, settings] = await Promise.all([
      app.api('GET', '/api/persons'),
      app.api('GET', '/api/zones'),
      app.api('GET', '/api/system/mode'),
      app.api('GET', '/api/events?order=desc&limit=1'),
      app.api('GET', '/api/baselines'),
      app.api('GET', '/api/bots'),
      app.api('GET', '/api/matches'),
      app.api('GET', '/api/settings/integration'),
    ]);
    return JSON.stringify([
      persons.body,
      zones.body,
      mode.body,
      events.body.events.map((event: { seq: number }) => event.seq),
      baselines.body,
      bots.body,
      matches.body,
      settings.body,
    ]);
  };

  it('generated bodies, path parameters and query strings on every route', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 10_000 }), pathSegment, query, fc.option(anyJson, { nil: undefined }), async (pick, segment, params, body) => {
        const route = routes[pick % routes.length]!;
        const url =
          route.path.replace(/\{[^}]+\}/g, encodeURIComponent(segment)) + (Object.keys(params).length ? '?' + new URLSearchParams(params).toString() : '');
        const payload = body === undefined || route.method === 'GET' || route.method === 'DELETE' ? undefined : JSON.stringify(body);
        const before = await snapshot();
        const response = await app.http.inject({
          method: route.method as 'GET',
          url,
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) },
          ...(payload !== undefined ? { payload } : {}),
        });
        assert.ok(response.statusCode < 500, `${route.method} ${url} ${payload ?? ''} -> ${response.statusCode} ${response.body}`);
        if (response.statusCode >= 400) {
          assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8', `${route.method} ${url}`);
          const problem = JSON.parse(response.body);
          assert.equal(problem.status, response.statusCode);
          assert.equal(typeof problem.code, 'string');
          if (route.method !== 'GET') assert.equal(await snapshot(), before, `${route.method} ${url} was refused but changed state`);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('oversized, deeply nested, non-UTF-8 and injection payloads are refused cleanly', async () => {
    const before = await snapshot();
    const send = (url: string, payload: string | Buffer, method = 'POST') =>
      app.http.inject({ method: method as 'POST', url, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, payload });
    const cases: [string, string | Buffer, number][] = [
      ['/api/persons', JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }), 413],
      ['/api/persons', '['.repeat(200_000) + ']'.repeat(200_000), 400],
      ['/api/persons', '['.repeat(600_000) + ']'.repeat(600_000), 413],
      ['/api/persons', '{"name":' + '['.repeat(50_000) + ']'.repeat(50_000) + '}', 400],
      ['/api/persons', JSON.stringify({ id: 'a'.repeat(10_000), name: 'Long' }), 400],
      ['/api/persons', JSON.stringify({ name: 'n'.repeat(100_000) }), 400],
      ['/api/persons', Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 201],
      ['/api/zones', JSON.stringify({ id: 'a+b', name: 'Wildcard' }), 400],
      ['/api/zones', JSON.stringify({ id: 'room/#', name: 'Topic injection' }), 400],
      ['/api/settings/integration', JSON.stringify({ webhook: { url: 'http://example.com/\r\nX-Injected: 1' } }), 400],
      ['/api/settings/integration', JSON.stringify({ mqtt: { topic_root: 'root/+/x' } }), 400],
      ['/api/settings/integration', JSON.stringify({ mqtt: { discovery_prefix: 'home\u0000assistant' } }), 400],
      ['/api/events', JSON.stringify({ type: 'zone.entry', person: 'ada', zone: 'hall/#' }), 400],
    ];
    for (const [url, payload, status] of cases) {
      const response = await send(url, payload);
      const label = `${url} ${String(payload).slice(0, 40)}`;
      if (status === 201) {
        // Invalid UTF-8 decodes to U+FFFD: stored as text, never a crash. Remove it again.
        assert.ok(response.statusCode === 201 || response.statusCode === 400, `${label}: ${response.statusCode}`);
        if (response.statusCode === 201) await app.api('DELETE', `/api/persons/${JSON.parse(response.body).id}`);
        continue;
      }
      assert.equal(response.statusCode, status, `${label}: ${response.body.slice(0, 200)}`);
      assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8', label);
    }
    const after = JSON.parse(await snapshot());
    const expected = JSON.parse(before);
    // The person created and deleted by the non-UTF-8 case moved the event log on; nothing else changed.
    assert.deepEqual(
      [after[0], after[1], after[2], after[4], after[5], after[6], after[7]],
      [expected[0], expected[1], expected[2], expected[4], expected[5], expected[6], expected[7]],
    );
  });
});
