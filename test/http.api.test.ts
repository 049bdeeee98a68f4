import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, createTestEnv, startTestApp, type TestApp, type TestEnv } from './helpers/app.js';
import { loadConfig, prepareDataDir } from '../src/config.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { SecretBox } from '../src/crypto.js';
import { Database } from '../src/db/index.js';
import { checkInstallation } from '../src/ops/installation.js';
import { PROBLEMS } from '../src/http/problem.js';
import { spawnMothership, START_TIMEOUT_MS } from './helpers/process.js';

describe('HTTP conventions', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp('sqlite');
  });
  after(() => app.cleanup());

  it('refuses admin endpoints without a valid token with a 401 problem', async () => {
    for (const headers of [{ authorization: '' }, { authorization: 'Bearer wrong-token' }, { authorization: `Basic ${ADMIN_TOKEN}` }]) {
      const response = await app.api('GET', '/api/persons', undefined, headers);
      assert.equal(response.status, 401);
      assert.equal(response.body.code, 'unauthorized');
      assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
    }
  });

  it('signs the dashboard in with a session cookie and out again', async () => {
    const wrong = await app.api('POST', '/api/session', { token: 'nope' }, { authorization: '' });
    assert.equal(wrong.status, 401);
    const signIn = await app.api('POST', '/api/session', { token: ADMIN_TOKEN }, { authorization: '' });
    assert.equal(signIn.status, 204);
    const cookie = String(signIn.headers['set-cookie']);
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    const session = cookie.split(';')[0]!;
    assert.equal((await app.api('GET', '/api/persons', undefined, { authorization: '', cookie: session })).status, 200);
    const forged = `${session.split('=')[0]}=${'A'.repeat(43)}`;
    assert.equal((await app.api('GET', '/api/persons', undefined, { authorization: '', cookie: forged })).status, 401);
    const signOut = await app.api('DELETE', '/api/session', undefined, { authorization: '' });
    assert.match(String(signOut.headers['set-cookie']), /Max-Age=0/);
  });

  it('answers problem+json for unknown routes, malformed JSON, oversized bodies and wrong media types', async () => {
    const unknown = await app.api('GET', '/api/nothing-here');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.code, 'not_found');
    const malformed = await app.api('POST', '/api/persons', '{"name": ');
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.code, 'bad_request', 'unreadable JSON names no field');
    const huge = await app.api('POST', '/api/persons', { name: 'x'.repeat(2 * 1024 * 1024) });
    assert.equal(huge.status, 413);
    assert.equal(huge.body.code, 'payload_too_large');
    const text = await app.api('POST', '/api/persons', 'name=x', { 'content-type': 'text/plain' });
    assert.equal(text.status, 415);
    assert.equal(text.headers['content-type'], 'application/problem+json; charset=utf-8');
    // A 415 says what it refused and what to send instead.
    assert.equal(text.body.detail, 'Content-Type text/plain is not accepted: send the body as JSON in UTF-8 with Content-Type: application/json');
    // JSON is UTF-8: a body declared in another charset is refused, not read as UTF-8.
    const utf16 = await app.api('POST', '/api/persons', '{"name":"x"}', { 'content-type': 'application/json; charset=utf-16' });
    assert.deepEqual([utf16.status, utf16.body.code], [415, 'unsupported_media_type']);
    assert.match(utf16.body.detail, /^Content-Type application\/json; charset=utf-16 is not accepted: send .* Content-Type: application\/json$/);
    for (const utf8 of ['application/json; charset=utf-8', 'application/json;charset="UTF-8"', 'application/json; charset=utf8']) {
      // Parsed, then refused by the schema: the charset was accepted (and nothing is created).
      const parsed = await app.api('POST', '/api/persons', { name: 5 }, { 'content-type': utf8 });
      assert.deepEqual([parsed.status, parsed.body.errors?.[0]?.path], [400, '/name'], utf8);
    }
    const proto = await app.api('POST', '/api/persons', '{"name":"x","__proto__":{"admin":true}}');
    assert.equal(proto.status, 400);
    assert.equal((await app.api('GET', '/api/persons')).body.length, 0, 'nothing was created');
  });

  it('names the allowed values of a field that must be one of them, in the detail and in errors', async () => {
    const mode = await app.api('PUT', '/api/system/mode', { mode: 'party' });
    assert.equal(mode.status, 400);
    assert.equal(mode.headers['content-type'], 'application/problem+json; charset=utf-8');
    const message = 'must be one of "home", "away", "sleep", "vacation"';
    assert.deepEqual(mode.body, {
      type: '/problems/validation_failed',
      title: 'Validation failed',
      status: 400,
      detail: `/mode ${message}`,
      code: 'validation_failed',
      errors: [{ path: '/mode', message }],
    });
    const event = await app.api('POST', '/api/events', { type: 'zone.entered', person: 'ada', zone: 'kitchen' });
    // The accepted types as the route's schema lists them (src/presence/routes.ts), each named in the message.
    const accepted: string[] = (await app.api('GET', '/openapi.json')).body.paths['/api/events'].post.requestBody.content['application/json'].schema.properties
      .type.enum;
    assert.ok(accepted.includes('zone.entry') && accepted.includes('anomaly.detected'), String(accepted));
    assert.deepEqual(event.body.errors, [{ path: '/type', message: `must be one of ${accepted.map((type) => `"${type}"`).join(', ')}` }]);
    const query = await app.api('GET', '/api/events?order=newest');
    assert.deepEqual(query.body.errors, [{ path: 'querystring:/order', message: 'must be one of "asc", "desc"' }]);
  });

  it('serves health, readiness, metrics and the OpenAPI document without a token', async () => {
    assert.equal((await app.api('GET', '/healthz', undefined, { authorization: '' })).status, 200);
    const ready = await app.api('GET', '/readyz', undefined, { authorization: '' });
    assert.equal(ready.status, 200);
    assert.equal(ready.body.database, 'ok');
    const metrics = await app.api('GET', '/metrics', undefined, { authorization: '' });
    assert.match(metrics.body, /mothership_events_total/);
    const openapi = await app.api('GET', '/openapi.json', undefined, { authorization: '' });
    assert.equal(openapi.body.openapi, '3.1.0');
    assert.ok(openapi.body.paths['/api/persons']);
    // The admin requirement lists the API-token scopes the operation accepts (OpenAPI 3.1 roles).
    assert.deepEqual(openapi.body.paths['/api/persons'].get.security, [{ admin: ['read', 'admin'] }, { session: ['admin', 'household'] }]);
    const docs = await app.http.inject({ method: 'GET', url: '/docs/' });
    assert.equal(docs.statusCode, 200);
  });

  it('streams new events over Server-Sent Events and resumes after Last-Event-ID', async () => {
    const address = await app.http.listen({ port: 0, host: '127.0.0.1' });
    await app.api('POST', '/api/zones', { id: 'hall', name: 'Hall' });
    const controller = new AbortController();
    const response = await fetch(`${address}/api/events/stream`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'last-event-id': '0' },
      signal: controller.signal,
    });
    assert.equal(response.headers.get('content-type'), 'text/event-stream');
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const created = app.api('POST', '/api/persons', { id: 'eve', name: 'Eve' });
    while (!text.includes('person.created')) text += decoder.decode((await reader.read()).value);
    controller.abort();
    await created;
    assert.match(text, /id: 1\nevent: zone.created\ndata: \{"event_type":"zone.created"/, 'history replayed after Last-Event-ID 0');
    assert.match(text, /id: 2\nevent: person.created\n/, 'live event follows');
  });

  it('answers a known path with a wrong method 405 naming the allowed methods, an unknown path 404', async () => {
    for (const [method, url, allow] of [
      ['PUT', '/api/persons', 'GET, HEAD, POST'],
      ['POST', '/api/zones/kitchen', 'GET, HEAD, PATCH, DELETE'],
      ['DELETE', '/healthz', 'GET, HEAD'],
      ['OPTIONS', '/api/persons', 'GET, HEAD, POST'],
    ] as const) {
      const response = await app.api(method, url);
      assert.equal(response.status, 405, `${method} ${url}`);
      assert.equal(response.headers.allow, allow);
      assert.equal(response.body.code, 'method_not_allowed');
    }
    assert.equal((await app.api('PUT', '/api/nothing-here')).status, 404);
    // A route of the asked method that finds nothing (a static file that is not there) is a 404, not
    // a 405 whose Allow names the very method that was used.
    for (const [method, url] of [
      ['GET', '/dashboard/nope.js'],
      ['HEAD', '/dashboard/nope.js'],
      ['GET', '/docs/static/nope.css'],
    ] as const) {
      const response = await app.http.inject({ method, url });
      assert.equal(response.statusCode, 404, `${method} ${url}`);
      assert.equal(response.headers.allow, undefined);
    }
  });

  it('takes a bodyless DELETE or POST that generic clients send with Content-Type: application/json', async () => {
    await app.api('POST', '/api/persons', { id: 'gen', name: 'Generic' });
    const json = { 'content-type': 'application/json' };
    assert.equal(
      (await app.http.inject({ method: 'DELETE', url: '/api/persons/gen', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...json } })).statusCode,
      204,
    );
    const secret = await app.http.inject({
      method: 'POST',
      url: '/api/settings/integration/webhook-secret',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...json },
    });
    assert.equal(secret.statusCode, 200);
    // A route that takes a body still says the body is missing.
    const empty = await app.http.inject({ method: 'POST', url: '/api/persons', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...json } });
    assert.equal(empty.statusCode, 400);
  });

  it('filters the event history by type, and reports the fall state', async () => {
    await app.api('POST', '/api/persons', { id: 'fay', name: 'Fay' });
    assert.deepEqual((await app.api('GET', '/api/system/fall')).body, { state: 'OFF', person: null, zone: null, timestamp: null });
    await app.api('POST', '/api/events', { type: 'fall.detected', person: 'fay' });
    const fall = (await app.api('GET', '/api/system/fall')).body;
    assert.deepEqual([fall.state, fall.person], ['ON', 'fay']);
    const falls = await app.api('GET', '/api/events?type=fall.detected&type=person.created&order=desc');
    assert.ok(falls.body.events.length >= 2);
    assert.ok(falls.body.events.every((event: { event_type: string }) => ['fall.detected', 'person.created'].includes(event.event_type)));
    assert.equal((await app.api('GET', '/api/events?type=fall.detected')).body.events.length, 1);
    const unknown = await app.api('GET', '/api/events?type=nope');
    assert.deepEqual([unknown.status, unknown.body.errors[0].path], [400, 'querystring:/type/0']);
    await app.api('POST', '/api/events', { type: 'fall.cleared', person: 'fay' });
    assert.equal((await app.api('GET', '/api/system/fall')).body.state, 'OFF');
  });

  it('resolves every problem type URI: JSON for clients, a page for browsers', async () => {
    for (const [code, { status, title }] of Object.entries(PROBLEMS)) {
      const page = await app.api('GET', `/problems/${code}`, undefined, { authorization: '' });
      assert.equal(page.status, 200, code);
      assert.deepEqual([page.body.type, page.body.code, page.body.status, page.body.title], [`/problems/${code}`, code, status, title]);
      assert.ok(page.body.description.length > 20, code);
    }
    const html = await app.http.inject({ method: 'GET', url: '/problems/validation_failed', headers: { accept: 'text/html,application/xhtml+xml' } });
    assert.match(String(html.headers['content-type']), /^text\/html/);
    assert.match(html.body, /<h1>400 Validation failed<\/h1>/);
    // The type of a real answer resolves.
    const refused = await app.api('POST', '/api/persons', { name: 7 });
    assert.equal((await app.api('GET', refused.body.type)).status, 200);
    for (const unknown of ['nope', 'toString', '__proto__']) assert.equal((await app.api('GET', `/problems/${unknown}`)).status, 404, unknown);
  });
});

describe('durability', () => {
  let env: TestEnv;
  before(async () => {
    env = await createTestEnv('sqlite');
  });
  after(() => env.cleanup());

  it('keeps every acknowledged event and state change across a restart', async () => {
    const first = await startTestApp('sqlite', {}, { testEnv: env });
    await first.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
    await first.api('POST', '/api/zones', { id: 'den', name: 'Den' });
    await first.api('POST', '/api/events', { type: 'zone.entry', person: 'ada', zone: 'den' });
    await first.close();
    const second = await startTestApp('sqlite', {}, { testEnv: env });
    try {
      assert.deepEqual((await second.api('GET', '/api/zones/den')).body.occupants, ['ada']);
      const types = (await second.api('GET', '/api/events')).body.events.map((event: { event_type: string }) => event.event_type);
      assert.deepEqual(types, ['person.created', 'zone.created', 'zone.entry', 'presence.changed']);
    } finally {
      await second.close();
    }
  });
});

describe('configuration', () => {
  it('refuses to start on a database whose secrets another SECRETS_KEY sealed, saying what to do; warns about a new MOTHERSHIP_ID', async () => {
    const first = await createTestEnv('postgres');
    // A second instance with its own DATA_DIR (so its own generated key) on the same database.
    const second = await createTestEnv('sqlite', { DATABASE_URL: first.env.DATABASE_URL! });
    try {
      const app = await startTestApp('postgres', {}, { testEnv: first });
      await app.api('POST', '/api/bots', { name: 'Sealed' });
      await app.close();
      const child = spawnMothership(['serve'], { ...second.env, PORT: '0', LOG_LEVEL: 'warn' });
      // A service that starts anyway would never exit: stop waiting.
      const code = await Promise.race([
        new Promise((resolve) => child.once('exit', resolve)),
        new Promise((resolve) => setTimeout(() => resolve('still running'), START_TIMEOUT_MS)),
      ]);
      child.kill('SIGKILL');
      assert.equal(code, 2, child.output());
      assert.match(child.output(), /Configuration error: SECRETS_KEY does not match the key this database's secrets were sealed with.*DATA_DIR\/secrets-key/);
      // With the first instance's key it starts, and a different MOTHERSHIP_ID is only a warning.
      const sameKey = { ...second.env, SECRETS_KEY: readFileSync(path.join(first.dataDir, 'secrets-key'), 'utf8').trim(), MOTHERSHIP_ID: 'ms-other' };
      const config = prepareDataDir(loadConfig(sameKey));
      const database = await Database.open(config);
      try {
        const warnings = await checkInstallation(database, new SecretBox(config.secretsKey), 'ms-other');
        assert.match(
          warnings.join(),
          /MOTHERSHIP_ID is "ms-other" but this database was last used as installation "test-ms".*mqtt cleanup --installation test-ms/,
        );
        assert.deepEqual(await checkInstallation(database, new SecretBox(config.secretsKey), 'ms-other'), [], 'said once');
      } finally {
        await database.close();
      }
    } finally {
      await second.cleanup();
      await first.cleanup();
    }
  });
});
