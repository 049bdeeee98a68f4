import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { deviceLabel } from '../../src/http/device.js';
import { REMEMBERED_TTL_MS, SESSION_IDLE_MS } from '../../src/http/sessions.js';
import { hashPassword, verifyPassword } from '../../src/users/password.js';
import { historyCommand, pushCommand } from '../../src/cli/baseline.js';
import { ADMIN_TOKEN, DIALECTS, startTestApp, type TestApp } from '../helpers/app.js';

const PASSWORD = 'correct horse battery';
const asDashboard = (cookie: string) => ({ authorization: '', cookie, 'sec-fetch-site': 'same-origin' });

/** Signs in as a user; the session cookie, and the Set-Cookie header it came in. */
async function signIn(app: TestApp, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  const response = await app.api('POST', '/api/session', body, { authorization: '', ...headers });
  assert.equal(response.status, 204, JSON.stringify(response.body));
  return { cookie: String(response.headers['set-cookie']).split(';')[0]!, header: String(response.headers['set-cookie']) };
}

interface Operation {
  method: string;
  template: string;
  path: string;
  security: Record<string, string[]>[];
}

/** Every secured /api operation of the OpenAPI document (HEAD beside each GET), with its security requirement. */
async function securedOperations(app: TestApp): Promise<Operation[]> {
  const doc = (await app.api('GET', '/openapi.json')).body as { paths: Record<string, Record<string, { security?: Record<string, string[]>[] }>> };
  const operations: Operation[] = [];
  for (const [template, methods] of Object.entries(doc.paths))
    for (const [method, operation] of Object.entries(methods)) {
      if (!operation.security?.length || !template.startsWith('/api/')) continue;
      const entry = { template, path: template.replace(/\{[^}]+\}/g, 'x1'), security: operation.security };
      operations.push({ method: method.toUpperCase(), ...entry });
      if (method === 'get') operations.push({ method: 'HEAD', ...entry });
    }
  return operations;
}
const rolesOf = (operation: Operation) => operation.security.find((requirement) => 'session' in requirement)?.session ?? [];
const scopesOf = (operation: Operation) => operation.security.find((requirement) => 'admin' in requirement)?.admin ?? [];

describe('passwords (scrypt) and devices (pure)', () => {
  it('a hash is PHC-formatted with its parameters and a fresh salt, verifies the password and nothing else', async () => {
    const first = await hashPassword(PASSWORD);
    const second = await hashPassword(PASSWORD);
    assert.match(first, /^\$scrypt\$ln=14,r=8,p=5\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    assert.notEqual(first, second, 'a new salt each time');
    assert.equal(await verifyPassword(PASSWORD, first), true);
    assert.equal(await verifyPassword(PASSWORD + ' ', first), false);
    assert.equal(await verifyPassword(PASSWORD, 'not a hash'), false);
  });

  it('names the browser and system of a session', () => {
    const android = 'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Mobile Safari/537.36';
    assert.equal(deviceLabel(android), 'Chrome on Android');
    assert.equal(
      deviceLabel('Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1'),
      'Safari on iPhone',
    );
    assert.equal(deviceLabel('Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:131.0) Gecko/20100101 Firefox/131.0'), 'Firefox on Windows');
    assert.equal(deviceLabel(undefined), null);
    assert.equal(deviceLabel('something else'), null);
  });
});

for (const dialect of DIALECTS) {
  describe(`dashboard users and their sessions (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
      for (const [username, role] of [
        ['kim', 'household'],
        ['lee', 'household'],
        ['ada', 'admin'],
      ])
        assert.equal((await app.api('POST', '/api/users', { username, name: username.toUpperCase(), role, password: PASSWORD })).status, 201);
      await app.api('POST', '/api/persons', { id: 'kim', name: 'Kim' });
      await app.api('POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
    });
    after(() => app.cleanup());

    it('an admin creates users: a name taken is 409 (never a silent suffix), bad input names the field, no password is ever shown', async () => {
      const again = await app.api('POST', '/api/users', { username: 'kim', role: 'household', password: PASSWORD });
      assert.equal(again.status, 409);
      // The messages are for the person at the form: no pattern, no "must NOT have fewer".
      for (const [body, path, message] of [
        [
          { username: 'Kim Smith', role: 'household', password: PASSWORD },
          '/username',
          'must be lowercase letters a-z, digits, - and _, starting with a letter or digit (at most 64)',
        ],
        [{ username: 'max', role: 'household', password: 'short' }, '/password', 'must be at least 8 characters'],
        [{ username: 'max', role: 'household', password: 'x'.repeat(257) }, '/password', 'must be at most 256 characters'],
        [{ username: 'max', role: 'owner', password: PASSWORD }, '/role', 'must be one of "admin", "household"'],
      ] as const) {
        const refused = await app.api('POST', '/api/users', body);
        assert.equal(refused.status, 400, JSON.stringify(body));
        assert.deepEqual(refused.body.errors[0], { path, message });
      }
      const list = await app.api('GET', '/api/users');
      assert.deepEqual(
        list.body.map((user: { username: string; role: string }) => `${user.username}:${user.role}`),
        ['ada:admin', 'kim:household', 'lee:household'],
      );
      assert.ok(!JSON.stringify(list.body).includes('scrypt'));
      const row = await app.database.db.selectFrom('users').selectAll().where('username', '=', 'kim').executeTakeFirstOrThrow();
      assert.match(row.password_hash, /^\$scrypt\$/);
      assert.ok(!row.password_hash.includes(PASSWORD));
    });

    it('signs in with name and password (name in any case, with spaces); a wrong password or name is one 401', async () => {
      const { cookie } = await signIn(app, { username: ' Kim ', password: PASSWORD });
      const me = await app.api('GET', '/api/session', undefined, asDashboard(cookie));
      assert.deepEqual(me.body, { user: 'kim', name: 'KIM', role: 'household' });
      for (const body of [
        { username: 'kim', password: PASSWORD + 'x' },
        { username: 'nobody', password: PASSWORD },
      ]) {
        const refused = await app.api('POST', '/api/session', body, { authorization: '' });
        assert.equal(refused.status, 401);
        assert.equal(refused.body.detail, 'Wrong user name or password');
      }
      const incomplete = await app.api('POST', '/api/session', { username: 'kim' }, { authorization: '' });
      assert.equal(incomplete.status, 400);
      assert.equal(incomplete.body.errors[0].path, '/password');
    });

    it('the admin token still signs in, pasted with spaces and a line break around it, as an admin', async () => {
      const { cookie } = await signIn(app, { token: `  ${ADMIN_TOKEN}\n` });
      assert.deepEqual((await app.api('GET', '/api/session', undefined, asDashboard(cookie))).body, { user: null, name: null, role: 'admin' });
      assert.equal((await app.api('GET', '/api/tokens', undefined, asDashboard(cookie))).status, 200);
    });

    it('a token of another scope is no dashboard account: GET /api/session refuses it rather than calling it an admin', async () => {
      const reader = (await app.api('POST', '/api/tokens', { name: 'Wall display', scope: 'read' })).body.token as string;
      const answer = await app.api('GET', '/api/session', undefined, { authorization: `Bearer ${reader}` });
      assert.deepEqual([answer.status, answer.body.code], [403, 'forbidden']);
      assert.deepEqual((await app.api('GET', '/api/session')).body, { user: null, name: null, role: 'admin' }, 'the admin token is the admin');
    });

    it('a household session uses Overview, People and Nodes and clears a fall; anything else is 403', async () => {
      const { cookie } = await signIn(app, { username: 'kim', password: PASSWORD });
      const as = asDashboard(cookie);
      assert.equal((await app.api('GET', '/api/persons', undefined, as)).status, 200);
      assert.equal((await app.api('PUT', '/api/system/mode', { mode: 'away' }, as)).status, 200);
      assert.equal((await app.api('PATCH', '/api/persons/kim', { name: 'Kimberly' }, as)).status, 200);
      assert.equal((await app.api('POST', '/api/events', { type: 'fall.cleared' }, as)).status, 202);
      const spoofed = await app.api('POST', '/api/events', { type: 'zone.entry', person: 'kim', zone: 'kitchen' }, as);
      assert.equal(spoofed.status, 403);
      assert.match(spoofed.body.detail, /fall\.cleared/);
      assert.equal((await app.api('GET', '/api/persons/kim')).body.zone, null, 'the refused event changed nothing');
      const settings = await app.api('POST', '/api/settings/integration', { webhook: { url: 'http://127.0.0.1:9/x' } }, as);
      assert.equal(settings.status, 403);
      assert.match(settings.body.detail, /household account may not call POST \/api\/settings\/integration/);
    });

    it('every operation the document does not open to households refuses a household session with 403; every one it opens, it lets through', async () => {
      const { cookie } = await signIn(app, { username: 'lee', password: PASSWORD });
      const operations = await securedOperations(app);
      let refused = 0;
      let allowed = 0;
      for (const operation of operations) {
        const body = ['POST', 'PUT', 'PATCH'].includes(operation.method) ? {} : undefined;
        // A stream stays open (the browser test follows one as a household user); signing out everywhere is tested below.
        if (['GET /api/events/stream', 'HEAD /api/events/stream', 'DELETE /api/sessions'].includes(`${operation.method} ${operation.path}`)) {
          assert.ok(rolesOf(operation).includes('household'));
          allowed++;
          continue;
        }
        const response = await app.api(operation.method, operation.path, body, asDashboard(cookie));
        const label = `${operation.method} ${operation.path}: ${response.status} ${JSON.stringify(response.body)?.slice(0, 160)}`;
        if (rolesOf(operation).includes('household')) {
          allowed++;
          assert.ok(response.status !== 401 && (response.status !== 403 || operation.path === '/api/events'), label);
          continue;
        }
        refused++;
        // Bot-only routes take no session at all (401); every admin one is 403 for a household.
        if (!rolesOf(operation).length) assert.equal(response.status, 401, label);
        else {
          assert.equal(response.status, 403, label);
          if (operation.method !== 'HEAD') assert.equal(response.body.code, 'forbidden', label);
        }
      }
      assert.ok(refused >= 30 && allowed >= 20, `refused ${refused}, allowed ${allowed}`);
      assert.equal((await app.api('GET', '/api/session', undefined, asDashboard(cookie))).status, 200, 'lee is still signed in');
    });

    it('"remember this device" keeps a session 30 days, idle or not; an ordinary one ends after 2 h idle', async () => {
      const remembered = await signIn(app, { username: 'kim', password: PASSWORD, remember: true });
      assert.match(remembered.header, new RegExp(`Max-Age=${REMEMBERED_TTL_MS / 1000}\\b`));
      const ordinary = await signIn(app, { username: 'kim', password: PASSWORD });
      assert.match(ordinary.header, /Max-Age=43200\b/);
      const rows = await app.database.db.selectFrom('admin_sessions').selectAll().where('user_id', '=', 'kim').where('remembered', '=', 1).execute();
      assert.ok(rows.some((row) => Date.parse(row.expires_at) - Date.parse(row.created_at) === REMEMBERED_TTL_MS));
      // Both idle for 3 hours (past the ordinary idle time).
      await app.database.db
        .updateTable('admin_sessions')
        .set({ last_seen_at: new Date(Date.now() - SESSION_IDLE_MS - 3600_000).toISOString() })
        .where('user_id', '=', 'kim')
        .execute();
      assert.equal((await app.api('GET', '/api/persons', undefined, asDashboard(remembered.cookie))).status, 200);
      assert.equal((await app.api('GET', '/api/persons', undefined, asDashboard(ordinary.cookie))).status, 401);
    });

    it('sessions are listed (a household user sees their own, an admin all) and revocable', async () => {
      const kim = await signIn(
        app,
        { username: 'kim', password: PASSWORD },
        { 'user-agent': 'Mozilla/5.0 (Linux; Android 14) Chrome/129.0 Mobile Safari/537.36' },
      );
      const lee = await signIn(app, { username: 'lee', password: PASSWORD });
      const kimList = (await app.api('GET', '/api/sessions', undefined, asDashboard(kim.cookie))).body as {
        id: string;
        user: string;
        device: string;
        current: boolean;
      }[];
      assert.ok(kimList.length >= 1 && kimList.every((session) => session.user === 'kim'));
      const current = kimList.find((session) => session.current)!;
      assert.equal(current.device, 'Chrome on Android');
      const all = (await app.api('GET', '/api/sessions')).body as { id: string; user: string | null; current: boolean }[];
      assert.ok(all.some((session) => session.user === 'lee') && all.some((session) => session.user === 'kim'));
      assert.ok(!JSON.stringify(all).includes(kim.cookie.split('=')[1]!), 'the cookie is never listed');
      const leeSession = all.find((session) => session.user === 'lee')!;
      assert.equal((await app.api('DELETE', `/api/sessions/${leeSession.id}`, undefined, asDashboard(kim.cookie))).status, 404, "not kim's to end");
      assert.equal((await app.api('GET', '/api/session', undefined, asDashboard(lee.cookie))).status, 200);
      assert.equal((await app.api('DELETE', `/api/sessions/${leeSession.id}`)).status, 204, 'an admin ends it');
      assert.equal((await app.api('GET', '/api/session', undefined, asDashboard(lee.cookie))).status, 401);
      const mine = await app.api('DELETE', `/api/sessions/${current.id}`, undefined, asDashboard(kim.cookie));
      assert.equal(mine.status, 204);
      assert.match(String(mine.headers['set-cookie']), /Max-Age=0/);
      assert.equal((await app.api('GET', '/api/session', undefined, asDashboard(kim.cookie))).status, 401);
    });

    it('"sign out everywhere" from a household session ends only that user\'s sessions', async () => {
      const kim = await signIn(app, { username: 'kim', password: PASSWORD });
      const lee = await signIn(app, { username: 'lee', password: PASSWORD });
      assert.equal((await app.api('DELETE', '/api/sessions', undefined, asDashboard(kim.cookie))).status, 204);
      assert.equal((await app.api('GET', '/api/session', undefined, asDashboard(kim.cookie))).status, 401);
      assert.equal((await app.api('GET', '/api/session', undefined, asDashboard(lee.cookie))).status, 200);
    });

    it("a role change applies at the next request; a new password or a deletion ends the user's sessions", async () => {
      const { cookie } = await signIn(app, { username: 'lee', password: PASSWORD });
      assert.equal((await app.api('GET', '/api/tokens', undefined, asDashboard(cookie))).status, 403);
      assert.equal((await app.api('PATCH', '/api/users/lee', { role: 'admin' })).body.role, 'admin');
      assert.equal((await app.api('GET', '/api/tokens', undefined, asDashboard(cookie))).status, 200);
      assert.equal((await app.api('PATCH', '/api/users/lee', { password: 'a new password' })).status, 200);
      assert.equal((await app.api('GET', '/api/session', undefined, asDashboard(cookie))).status, 401);
      await app.api('POST', '/api/session', { username: 'lee', password: PASSWORD }, { authorization: '' }).then((r) => assert.equal(r.status, 401));
      const again = await signIn(app, { username: 'lee', password: 'a new password' });
      assert.equal((await app.api('DELETE', '/api/users/lee')).status, 204);
      assert.equal((await app.api('GET', '/api/session', undefined, asDashboard(again.cookie))).status, 401);
      assert.equal((await app.api('DELETE', '/api/users/lee')).status, 404);
    });

    it('a session outlives neither its admin token nor its user: listed and answered only while both hold', async () => {
      const admin = await signIn(app, { token: ADMIN_TOKEN });
      assert.equal((await app.api('POST', '/api/users', { username: 'sam', name: 'Sam', role: 'household', password: PASSWORD })).status, 201);
      const sam = await signIn(app, { username: 'sam', password: PASSWORD });
      const listed = async () => ((await app.api('GET', '/api/sessions')).body as { user: string | null }[]).length;
      const before = await listed();
      // As a restart with another ADMIN_TOKEN leaves it: the session's check is not the token's now.
      await app.database.write((db) => db.updateTable('admin_sessions').set({ token_check: 'another-admin-token' }).where('user_id', 'is', null).execute());
      assert.equal((await app.api('GET', '/api/session', undefined, asDashboard(admin.cookie))).status, 401, 'another admin token');
      // The user's row gone behind the service's back (a restore, another release): the session has no role.
      await app.database.write((db) => db.deleteFrom('users').where('username', '=', 'sam').execute());
      assert.equal((await app.api('GET', '/api/session', undefined, asDashboard(sam.cookie))).status, 401, 'a user that is gone');
      assert.ok((await listed()) <= before - 2, 'neither is listed');
    });
  });
}

describe('signing in with a password is rate limited like the admin token', () => {
  it('6 attempts a minute per address, then 429, right password or wrong', async () => {
    const app = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '60', RATE_LIMIT_REFILL_PER_SEC: '1' });
    try {
      await app.api('POST', '/api/users', { username: 'kim', role: 'household', password: PASSWORD });
      const statuses: number[] = [];
      for (let attempt = 0; attempt < 6; attempt++)
        statuses.push((await app.api('POST', '/api/session', { username: 'kim', password: `guess ${attempt}` }, { authorization: '' })).status);
      statuses.push((await app.api('POST', '/api/session', { username: 'kim', password: PASSWORD }, { authorization: '' })).status);
      assert.deepEqual(statuses, [401, 401, 401, 401, 401, 401, 429]);
    } finally {
      await app.cleanup();
    }
  });
});

describe('a ci token pushes and reads baselines, and nothing else', () => {
  let app: TestApp;
  let token: string;
  let base: string;
  let dir: string;
  before(async () => {
    app = await startTestApp('sqlite');
    await app.http.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(app.http.server.address() as AddressInfo).port}`;
    token = (await app.api('POST', '/api/tokens', { name: 'GitHub Actions', scope: 'ci' })).body.token;
    dir = mkdtempSync(path.join(tmpdir(), 'ms-ci-'));
  });
  after(async () => {
    await app.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it('`mothership baseline push` and `history` work with it', async () => {
    const lines: string[] = [];
    const io = { out: (line: string) => lines.push(line), err: (line: string) => lines.push(line) };
    const env = { MOTHERSHIP_TOKEN: token };
    for (const [sha, ms] of [
      ['aaaaaaa', 40],
      ['bbbbbbb', 41],
    ] as const) {
      const file = path.join(dir, `${sha}.json`);
      writeFileSync(file, JSON.stringify({ commit_sha: sha, timestamp: new Date().toISOString(), subject_geomean: 0.5, grep_1000_mean_ms: ms }));
      assert.equal(await pushCommand([file, '--server', base], io, env), 0, lines.join('\n'));
    }
    assert.equal(await historyCommand(['--server', base], io, env), 0, lines.join('\n'));
    assert.ok(lines.join('\n').includes('bbbbbbb'));
  });

  it('every operation outside the baselines refuses it with 403; the baseline ones list the scope', async () => {
    let refused = 0;
    for (const operation of await securedOperations(app)) {
      const scopes = scopesOf(operation);
      if (operation.template.startsWith('/api/baselines')) {
        assert.ok(scopes.includes('ci'), `${operation.method} ${operation.template}`);
        continue;
      }
      assert.ok(!scopes.includes('ci'), `${operation.method} ${operation.template} lists ci`);
      if (!scopes.length) continue; // bot-only: no token at all
      const body = ['POST', 'PUT', 'PATCH'].includes(operation.method) ? {} : undefined;
      const response = await app.api(operation.method, operation.path, body, { authorization: `Bearer ${token}` });
      assert.equal(response.status, 403, `${operation.method} ${operation.path}: ${response.status}`);
      refused++;
    }
    assert.ok(refused >= 40, `${refused} refused`);
    for (const url of ['/api/baselines', '/api/baselines/latest', '/api/baselines/1', '/api/baselines/compare?head=latest&base=1'])
      assert.equal((await app.api('GET', url, undefined, { authorization: `Bearer ${token}` })).status, 200, url);
  });
});
