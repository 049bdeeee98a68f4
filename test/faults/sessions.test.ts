import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import path from 'node:path';
import { crossSiteRefusal } from '../../src/http/auth.js';
import { SESSION_IDLE_MS, SESSION_TTL_MS, sessionValid } from '../../src/http/sessions.js';
import { ADMIN_TOKEN, createTestEnv, DIALECTS, startTestApp, type TestApp } from '../helpers/app.js';
import { freePort } from '../helpers/broker.js';

const signIn = async (app: TestApp, headers: Record<string, string> = {}) => {
  const response = await app.api('POST', '/api/session', { token: ADMIN_TOKEN }, { authorization: '', ...headers });
  assert.equal(response.status, 204);
  return { cookie: String(response.headers['set-cookie']).split(';')[0]!, header: String(response.headers['set-cookie']) };
};
const asDashboard = (cookie: string) => ({ authorization: '', cookie, 'sec-fetch-site': 'same-origin' });

describe('the cross-site rule for the session cookie (pure)', () => {
  it('lets same-origin requests and typed-in navigations through, refuses every other site', () => {
    assert.equal(crossSiteRefusal('POST', 'same-origin', 'http://hub:8080', 'hub:8080'), null);
    assert.equal(crossSiteRefusal('GET', 'none', undefined, 'hub:8080'), null, 'a URL typed into the address bar');
    assert.notEqual(crossSiteRefusal('POST', 'none', undefined, 'hub:8080'), null);
    for (const site of ['same-site', 'cross-site']) {
      assert.notEqual(crossSiteRefusal('POST', site, undefined, 'hub:8080'), null, site);
      assert.notEqual(crossSiteRefusal('GET', site, undefined, 'hub:8080'), null, site);
    }
  });

  it('without Fetch Metadata, the Origin must be this host; a change with neither header is refused', () => {
    assert.equal(crossSiteRefusal('POST', undefined, 'http://hub:8080', 'hub:8080'), null);
    assert.notEqual(crossSiteRefusal('POST', undefined, 'http://hub:1880', 'hub:8080'), null, 'another port is another origin');
    assert.notEqual(crossSiteRefusal('POST', undefined, 'null', 'hub:8080'), null);
    assert.notEqual(crossSiteRefusal('DELETE', undefined, undefined, 'hub:8080'), null);
    assert.equal(crossSiteRefusal('GET', undefined, undefined, 'hub:8080'), null, 'curl reading with a cookie');
  });
});

describe('session lifetime (pure)', () => {
  it('ends at the absolute expiry and after the idle time', () => {
    const start = Date.parse('2026-01-01T00:00:00Z');
    const row = (lastSeen: number) => ({ last_seen_at: new Date(lastSeen).toISOString(), expires_at: new Date(start + SESSION_TTL_MS).toISOString() });
    assert.equal(sessionValid(row(start), start + SESSION_IDLE_MS - 1), true);
    assert.equal(sessionValid(row(start), start + SESSION_IDLE_MS), false, 'idle too long');
    assert.equal(sessionValid(row(start + SESSION_TTL_MS - 10), start + SESSION_TTL_MS), false, 'past the absolute expiry, however active');
  });
});

for (const dialect of DIALECTS) {
  describe(`dashboard sessions (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.cleanup());

    it('sign-out ends the session on the server: a copied cookie stops working', async () => {
      const { cookie } = await signIn(app);
      assert.equal((await app.api('GET', '/api/persons', undefined, asDashboard(cookie))).status, 200);
      const out = await app.api('DELETE', '/api/session', undefined, asDashboard(cookie));
      assert.equal(out.status, 204);
      assert.match(String(out.headers['set-cookie']), /Max-Age=0/);
      assert.equal((await app.api('GET', '/api/persons', undefined, asDashboard(cookie))).status, 401, 'the copied cookie is dead');
    });

    it('"sign out everywhere" ends every session', async () => {
      const first = await signIn(app);
      const second = await signIn(app);
      assert.equal((await app.api('DELETE', '/api/sessions', undefined, asDashboard(first.cookie))).status, 204);
      assert.equal((await app.api('GET', '/api/persons', undefined, asDashboard(first.cookie))).status, 401);
      assert.equal((await app.api('GET', '/api/persons', undefined, asDashboard(second.cookie))).status, 401);
    });

    it('a session idle past the idle time is refused', async () => {
      const { cookie } = await signIn(app);
      await app.database.db
        .updateTable('admin_sessions')
        .set({ last_seen_at: new Date(Date.now() - SESSION_IDLE_MS - 1000).toISOString() })
        .execute();
      assert.equal((await app.api('GET', '/api/persons', undefined, asDashboard(cookie))).status, 401);
    });

    it('stores only a hash of the session id', async () => {
      const { cookie } = await signIn(app);
      const id = cookie.split('=')[1]!;
      const rows = await app.database.db.selectFrom('admin_sessions').selectAll().execute();
      assert.ok(rows.length > 0);
      assert.ok(rows.every((row) => !JSON.stringify(row).includes(id)));
    });

    it('cookie-authenticated changes from another origin get 403; the dashboard origin passes', async () => {
      const { cookie } = await signIn(app);
      const cases: Array<[Record<string, string>, number]> = [
        [{ 'sec-fetch-site': 'same-site' }, 403], // Node-RED on :1880 of the same host
        [{ 'sec-fetch-site': 'cross-site' }, 403],
        [{ origin: 'http://localhost:1880' }, 403],
        [{}, 403], // a bodyless POST with only the cookie
        [{ 'sec-fetch-site': 'same-origin' }, 204],
        [{ origin: 'http://localhost:80' }, 204], // inject's Host is localhost:80
      ];
      for (const [headers, status] of cases) {
        const response = await app.api('POST', '/api/settings/integration/discovery', undefined, { authorization: '', cookie, ...headers });
        // 409: MQTT is off; it reached the handler. 403 must come first.
        const reached = response.status === 409 ? 204 : response.status;
        assert.equal(reached, status, JSON.stringify(headers));
        if (status === 403) assert.equal(response.body.code, 'forbidden');
      }
      const rotate = await app.api('POST', '/api/bots', { name: 'csrf' }, { authorization: '', cookie, 'sec-fetch-site': 'same-site' });
      assert.equal(rotate.status, 403);
      const bots = await app.api('GET', '/api/bots');
      assert.equal(JSON.stringify(bots.body).includes('"csrf"'), false, 'no bot was created');
    });

    it('a new admin token ends every session opened under the old one', async () => {
      const { cookie } = await signIn(app);
      const sameData = {
        dataDir: app.config.dataDir,
        env: {
          DATA_DIR: app.config.dataDir,
          ADMIN_TOKEN: 'another-admin-token-0123456789',
          LOG_LEVEL: 'silent',
          MOTHERSHIP_ID: 'test-ms',
          WORKER: 'off',
          ...(app.config.databaseUrl ? { DATABASE_URL: app.config.databaseUrl } : {}),
        },
        cleanup: async () => {},
      };
      const other = await startTestApp(dialect, {}, { testEnv: sameData });
      try {
        assert.equal((await other.api('GET', '/api/persons', undefined, asDashboard(cookie))).status, 401);
      } finally {
        await other.cleanup();
      }
    });
  });
}

describe('cookie attributes', () => {
  it('sets Secure when the request came over TLS through a trusted proxy', async () => {
    const app = await startTestApp('sqlite', { TRUST_PROXY: '127.0.0.1' });
    try {
      const plain = await signIn(app);
      assert.doesNotMatch(plain.header, /Secure/);
      const response = await app.http.inject({
        method: 'POST',
        url: '/api/session',
        remoteAddress: '127.0.0.1',
        headers: { 'content-type': 'application/json', 'x-forwarded-proto': 'https' },
        payload: JSON.stringify({ token: ADMIN_TOKEN }),
      });
      assert.equal(response.statusCode, 204);
      assert.match(String(response.headers['set-cookie']), /; Secure/);
    } finally {
      await app.cleanup();
    }
  });
});

describe('guessing the admin token on any route', () => {
  it('a wrong Bearer token costs the sign-in bucket: 6 guesses, then 429, on whatever route', async () => {
    const app = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '60', RATE_LIMIT_REFILL_PER_SEC: '1' });
    try {
      const statuses: number[] = [];
      const routes = ['/api/persons', '/api/bots', '/api/settings/integration', '/api/events', '/api/zones', '/api/baselines', '/api/persons', '/api/bots'];
      for (const route of routes) statuses.push((await app.api('GET', route, undefined, { authorization: 'Bearer guess' })).status);
      assert.deepEqual(statuses, [401, 401, 401, 401, 401, 401, 429, 429]);
      const signIn = await app.api('POST', '/api/session', { token: ADMIN_TOKEN }, { authorization: '' });
      assert.equal(signIn.status, 429, 'the guesses emptied the sign-in bucket');
    } finally {
      await app.cleanup();
    }
  });

  it('the sign-in bucket fails closed when Redis is down, even with RATE_LIMIT_REDIS_FAILURE=open', async () => {
    const port = await freePort();
    const app = await startTestApp('sqlite', { REDIS_URL: `redis://127.0.0.1:${port}`, RATE_LIMIT_REDIS_FAILURE: 'open' });
    try {
      assert.equal((await app.api('GET', '/api/persons')).status, 200, 'other routes fail open as configured');
      const guess = await app.api('GET', '/api/persons', undefined, { authorization: 'Bearer guess' });
      assert.equal(guess.status, 503);
      const signIn = await app.api('POST', '/api/session', { token: 'guess' }, { authorization: '' });
      assert.equal(signIn.status, 503);
    } finally {
      await app.cleanup();
    }
  });
});

describe('401 answers name their scheme (RFC 9110)', () => {
  it('WWW-Authenticate: Bearer for admin routes, the signature scheme for bot routes', async () => {
    const app = await startTestApp('sqlite');
    try {
      const admin = await app.api('GET', '/api/persons', undefined, { authorization: '' });
      assert.equal(admin.headers['www-authenticate'], 'Bearer realm="mothership"');
      const bot = await app.api('POST', '/api/request-enrichment', { match_id: 'm1' }, { authorization: '' });
      assert.equal(bot.status, 401);
      assert.equal(bot.headers['www-authenticate'], 'Mothership-Signature realm="mothership"');
    } finally {
      await app.cleanup();
    }
  });
});

describe('files in DATA_DIR', () => {
  it('the data directory is 0700 and the database and key files 0600', async () => {
    const env = await createTestEnv('sqlite');
    const dataDir = path.join(env.dataDir, 'fresh');
    const { ADMIN_TOKEN: _generated, ...withoutToken } = env.env;
    const app = await startTestApp('sqlite', {}, { testEnv: { ...env, env: { ...withoutToken, DATA_DIR: dataDir } } });
    try {
      await app.api('POST', '/api/persons', { name: 'Ada' });
      const mode = (file: string) => statSync(path.join(dataDir, file)).mode & 0o777;
      assert.equal(statSync(dataDir).mode & 0o777, 0o700);
      for (const file of ['mothership.db', 'mothership.db-wal', 'secrets-key', 'admin-token']) assert.equal(mode(file), 0o600, file);
    } finally {
      await app.cleanup();
      await env.cleanup();
    }
  });
});
