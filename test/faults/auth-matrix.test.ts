import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ADMIN_TOKEN, createTestEnv, DIALECTS, eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { TOKEN_CACHE_MS } from '../../src/tokens/index.js';
import { freePort } from '../helpers/broker.js';
import { startService, stopProcess } from '../helpers/process.js';

/**
 * Every admin operation of the OpenAPI document, in every request-target form an attacker can
 * write, with every kind of wrong credential: 401 or 403, never the handler. Generated from
 * /openapi.json, so a route added later is covered without editing this file.
 */

const PUBLIC_API_OPERATIONS = new Set(['POST /api/session', 'DELETE /api/session']);

/** The same route written the ways a router may normalise: encoded letters, and absolute-form. */
export function requestTargets(path: string, authority: string): Record<string, string> {
  const rest = path.slice('/api'.length);
  return {
    plain: path,
    'encoded a': `/%61pi${rest}`,
    'encoded i': `/ap%69${rest}`,
    'encoded api': `/%61%70%69${rest}`,
    'absolute-form': `http://${authority}${path}`,
    'absolute-form, other host': `http://x${path}`,
    'absolute-form, encoded': `http://x/%61pi${rest}`,
  };
}

/** A raw request: node's client sends `target` exactly as written (absolute-form included). */
export function rawRequest(
  port: number,
  method: string,
  target: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: target,
        headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}) },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), headers: response.headers }));
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

interface Operation {
  method: string;
  path: string;
  secured: boolean;
}

function operationsOf(openapi: { paths: Record<string, Record<string, { security?: unknown[] }>> }): Operation[] {
  const operations: Operation[] = [];
  for (const [template, methods] of Object.entries(openapi.paths)) {
    const path = template.replace(/\{[^}]+\}/g, 'x1');
    for (const [method, operation] of Object.entries(methods)) {
      operations.push({ method: method.toUpperCase(), path, secured: Boolean(operation.security?.length) });
      // Fastify answers HEAD for every GET route: the same handler, so the same rule.
      if (method === 'get') operations.push({ method: 'HEAD', path, secured: Boolean(operation.security?.length) });
    }
  }
  return operations;
}

describe('no request without the admin credential reaches an admin handler', () => {
  let app: TestApp;
  let port: number;
  let operations: Operation[];
  before(async () => {
    app = await startTestApp('sqlite');
    await app.http.listen({ port: 0, host: '127.0.0.1' });
    port = (app.http.server.address() as AddressInfo).port;
    operations = operationsOf((await app.api('GET', '/openapi.json', undefined, { authorization: '' })).body);
  });
  after(() => app.cleanup());

  it('the only /api operations without a security requirement are the sign-in and sign-out', () => {
    const open = operations
      .filter((operation) => operation.path.startsWith('/api/') && !operation.secured)
      .map((operation) => `${operation.method} ${operation.path}`);
    assert.deepEqual(open.sort(), [...PUBLIC_API_OPERATIONS].sort());
    assert.ok(operations.filter((operation) => operation.secured).length >= 50, 'the document lists the admin operations');
  });

  let session = '';
  let revoked = '';
  const credentials: Record<string, () => Record<string, string>> = {
    'no credentials': () => ({}),
    'a wrong bearer token': () => ({ authorization: 'Bearer not-the-token' }),
    'an unknown API token': () => ({ authorization: `Bearer mst_${'A'.repeat(43)}` }),
    'a revoked admin API token': () => ({ authorization: `Bearer ${revoked}` }),
    'an empty bearer token': () => ({ authorization: 'Bearer ' }),
    'a basic credential': () => ({ authorization: 'Basic YWRtaW46YWRtaW4=' }),
    'a forged session cookie': () => ({ cookie: 'mothership_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }),
    // A page on another port of the same host (Node-RED on :1880) sends the real cookie along.
    'a valid session cookie sent by another origin': () => ({ cookie: session, 'sec-fetch-site': 'same-site', origin: 'http://127.0.0.1:1880' }),
  };

  it('creates and revokes an admin API token for the revoked case', async () => {
    const created = await app.api('POST', '/api/tokens', { name: 'Revoked', scope: 'admin' });
    revoked = created.body.token;
    assert.equal((await app.api('DELETE', `/api/tokens/${created.body.id}`)).status, 204);
  });

  it('signs in for the cross-origin case', async () => {
    const response = await rawRequest(port, 'POST', '/api/session', {}, JSON.stringify({ token: ADMIN_TOKEN }));
    assert.equal(response.status, 204);
    session = String(response.headers['set-cookie']).split(';')[0]!;
  });

  for (const [what, headersOf] of Object.entries(credentials)) {
    it(`with ${what}, every secured operation in every request-target form answers 401 or 403`, async () => {
      const headers = headersOf();
      // A cookie may be refused as cross-origin (403) before it is looked up; bot-only routes ignore it (401).
      const allowed = headers.cookie ? [401, 403] : [401];
      let checked = 0;
      for (const operation of operations.filter((candidate) => candidate.secured)) {
        for (const [form, target] of Object.entries(requestTargets(operation.path, `127.0.0.1:${port}`))) {
          const body = ['POST', 'PUT', 'PATCH'].includes(operation.method) ? '{}' : undefined;
          const response = await rawRequest(port, operation.method, target, headers, body);
          const label = `${operation.method} ${target} (${form}, ${what})`;
          assert.ok(allowed.includes(response.status), `${label} answered ${response.status}: ${response.body.slice(0, 200)}`);
          if (operation.method !== 'HEAD') assert.equal(JSON.parse(response.body).code, response.status === 401 ? 'unauthorized' : 'forbidden', label);
          checked++;
        }
      }
      assert.ok(checked >= 350, `only ${checked} requests checked`);
    });
  }

  it('other spellings of an admin path never reach a handler either', async () => {
    for (const operation of operations.filter((candidate) => candidate.secured && candidate.method !== 'HEAD')) {
      const rest = operation.path.slice('/api'.length);
      for (const target of [
        `/API${rest}`,
        `//api${rest}`,
        `/api${rest}/`,
        `/api/.${rest}`,
        `/api/..${operation.path}`,
        `/%2561pi${rest}`,
        `/api${rest.replace(/\//g, '%2F')}`,
        `/api${rest};x`,
      ]) {
        const response = await rawRequest(port, operation.method, target, {}, operation.method === 'GET' || operation.method === 'DELETE' ? undefined : '{}');
        assert.ok(response.status >= 400 && response.status < 500, `${operation.method} ${target} answered ${response.status}`);
        assert.ok(response.status !== 200 && response.status !== 201 && response.status !== 204, `${operation.method} ${target} reached a handler`);
      }
    }
  });
});

for (const dialect of DIALECTS) {
  describe(`scoped API tokens (${dialect})`, () => {
    let app: TestApp;
    const as = (token: string) => ({ authorization: `Bearer ${token}` });
    const createToken = async (name: string, scope: string): Promise<{ id: string; token: string }> => {
      const response = await app.api('POST', '/api/tokens', { name, scope });
      assert.equal(response.status, 201, JSON.stringify(response.body));
      assert.match(response.body.token, /^mst_[A-Za-z0-9_-]{43}$/);
      return response.body;
    };
    const refusal = async (method: string, url: string, token: string, body?: unknown) => {
      const response = await app.api(method, url, body, as(token));
      assert.equal(response.status, 403, `${method} ${url}: ${JSON.stringify(response.body)}`);
      assert.equal(response.body.code, 'forbidden');
      return String(response.body.detail);
    };
    before(async () => {
      app = await startTestApp(dialect);
      await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
      await app.api('POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
    });
    after(() => app.cleanup());

    it('an ingest token posts events and heartbeats, and gets 403 naming the scope on anything else', async () => {
      const { token } = await createToken('Kitchen sensor', 'ingest');
      assert.equal((await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada', zone: 'kitchen' }, as(token))).status, 202);
      assert.equal((await app.api('POST', '/api/nodes/kitchen-node/heartbeat', { quality: 80 }, as(token))).status, 204);
      assert.match(await refusal('GET', '/api/persons', token), /scope "read" or "admin"/);
      assert.match(await refusal('POST', '/api/persons', token, { name: 'Eve' }), /scope "admin"/);
      await refusal('GET', '/api/events', token);
      await refusal('POST', '/api/tokens', token, { name: 'Escalation', scope: 'admin' });
    });

    it('a read token GETs (and HEADs) every kind of admin route, history included, and may change nothing', async () => {
      const { token } = await createToken('Grafana', 'read');
      for (const url of ['/api/persons', '/api/events?limit=5', '/api/settings/integration', '/api/tokens', '/api/bots'])
        assert.equal((await app.api('GET', url, undefined, as(token))).status, 200, url);
      assert.equal((await app.api('HEAD', '/api/persons', undefined, as(token))).status, 200);
      assert.match(await refusal('POST', '/api/persons', token, { name: 'Eve' }), /scope "admin"/);
      assert.match(await refusal('POST', '/api/events', token, { type: 'fall.detected' }), /scope "ingest" or "admin"/);
      await refusal('DELETE', '/api/persons/ada', token);
      await refusal('DELETE', '/api/tokens/grafana', token);
      assert.equal((await app.api('GET', '/api/persons/ada')).status, 200);
    });

    it('an admin token may do everything, managing tokens included', async () => {
      const { token } = await createToken('Import script', 'admin');
      assert.equal((await app.api('POST', '/api/persons', { name: 'Grace' }, as(token))).status, 201);
      assert.equal((await app.api('POST', '/api/events', { type: 'zone.entry', person: 'grace', zone: 'kitchen' }, as(token))).status, 202);
      const created = await app.api('POST', '/api/tokens', { name: 'Made by a token', scope: 'ingest' }, as(token));
      assert.equal(created.status, 201);
      assert.equal((await app.api('DELETE', `/api/tokens/${created.body.id}`, undefined, as(token))).status, 204);
    });

    it('a revoked token is refused at once (401), as is an unknown one; the list never shows a token and records its last use', async () => {
      const { id, token } = await createToken('Old sensor', 'ingest');
      assert.equal((await app.api('POST', '/api/nodes/old-node/heartbeat', { quality: 50 }, as(token))).status, 204);
      const listed = await app.api('GET', '/api/tokens');
      assert.ok(!JSON.stringify(listed.body).includes('mst_'), 'no token in the list');
      const entry = listed.body.find((row: { id: string }) => row.id === id);
      assert.deepEqual(Object.keys(entry).sort(), ['created_at', 'id', 'last_used_at', 'name', 'scope']);
      assert.ok(entry.last_used_at, 'last use recorded');
      assert.equal((await app.api('DELETE', `/api/tokens/${id}`)).status, 204);
      const refused = await app.api('POST', '/api/nodes/old-node/heartbeat', { quality: 50 }, as(token));
      assert.equal(refused.status, 401);
      assert.equal(refused.body.code, 'unauthorized');
      assert.equal((await app.api('GET', '/api/persons', undefined, as('mst_' + 'A'.repeat(43)))).status, 401);
      assert.equal((await app.api('DELETE', `/api/tokens/${id}`)).status, 404);
      assert.equal(
        (await app.api('GET', '/api/tokens')).body.some((row: { id: string }) => row.id === id),
        false,
      );
    });

    it('the stored row holds the hash, never the token', async () => {
      const { id, token } = await createToken('Hashed', 'read');
      const row = await app.database.db.selectFrom('api_tokens').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      assert.equal(row.token_hash, createHash('sha256').update(token).digest('base64url'));
      assert.ok(!JSON.stringify(row).includes(token));
    });

    it('the OpenAPI document names the scopes each operation accepts', async () => {
      const doc = (await app.api('GET', '/openapi.json')).body;
      const scopes = (path: string, method: string) =>
        doc.paths[path][method].security.find((requirement: Record<string, string[]>) => 'admin' in requirement).admin;
      assert.deepEqual(scopes('/api/events', 'post'), ['ingest', 'admin']);
      assert.deepEqual(scopes('/api/nodes/{id}/heartbeat', 'post'), ['ingest', 'admin']);
      assert.deepEqual(scopes('/api/events', 'get'), ['read', 'admin']);
      assert.deepEqual(scopes('/api/persons', 'post'), ['admin']);
      assert.deepEqual(scopes('/api/tokens', 'post'), ['admin']);
      // Who a session or the admin token is: a read token is neither, and the document says so.
      assert.deepEqual(scopes('/api/session', 'get'), ['admin']);
      const { token } = await createToken('Wall display', 'read');
      assert.match(await refusal('GET', '/api/session', token), /scope "admin"/);
    });
  });

  describe(`a revoked token on another instance (${dialect})`, () => {
    it('is refused at once where it was revoked, and within TOKEN_CACHE_MS on an instance sharing the database', async () => {
      const env = await createTestEnv(dialect);
      const first = await startTestApp(dialect, {}, { testEnv: env });
      const second = await startTestApp(dialect, {}, { testEnv: env });
      try {
        const { id, token } = (await first.api('POST', '/api/tokens', { name: 'Shared', scope: 'read' })).body;
        const readOn = async (instance: TestApp) => (await instance.api('GET', '/api/system/mode', undefined, { authorization: `Bearer ${token}` })).status;
        assert.equal(await readOn(second), 200, 'a token made on one instance works on the other');
        assert.equal((await first.api('DELETE', `/api/tokens/${id}`)).status, 204);
        const revokedAt = Date.now();
        assert.equal(await readOn(first), 401);
        await eventually(async () => (await readOn(second)) === 401, TOKEN_CACHE_MS + 2000, 'refused on the other instance');
        assert.ok(Date.now() - revokedAt <= TOKEN_CACHE_MS + 1000, `refused after ${Date.now() - revokedAt} ms`);
      } finally {
        await second.cleanup();
        await first.cleanup();
        await env.cleanup();
      }
    });
  });

  describe(`rate limits by credential (${dialect})`, () => {
    let app: TestApp;
    // The production default: 60 requests, one more a second, per address.
    before(async () => {
      app = await startTestApp(dialect, { RATE_LIMIT_CAPACITY: '60', RATE_LIMIT_REFILL_PER_SEC: '1' });
    });
    after(() => app.cleanup());

    it('500 POST /api/persons with an admin API token, then 100 requests with the admin token: no 429', async () => {
      const token = (await app.api('POST', '/api/tokens', { name: 'Importer', scope: 'admin' })).body.token as string;
      for (let index = 0; index < 500; index++) {
        const response = await app.api('POST', '/api/persons', { name: `Person ${index}` }, { authorization: `Bearer ${token}` });
        assert.equal(response.status, 201, `request ${index + 1}: ${JSON.stringify(response.body)}`);
      }
      for (let index = 0; index < 100; index++) assert.equal((await app.api('GET', '/api/persons?limit=1')).status, 200, `admin token request ${index + 1}`);
    });

    it('100 requests of a signed-in dashboard session: no 429 (its own bucket, as a token has)', async () => {
      const signIn = await app.api('POST', '/api/session', { token: ADMIN_TOKEN }, { authorization: '' });
      assert.equal(signIn.status, 204);
      const session = String(signIn.headers['set-cookie']).split(';')[0]!;
      for (let index = 0; index < 100; index++)
        assert.equal(
          (await app.api('GET', '/api/persons?limit=1', undefined, { authorization: '', cookie: session })).status,
          200,
          `session request ${index + 1}`,
        );
      // A forged cookie is no session: refused, and charged to the address (the next test runs that bucket dry).
      const forged = `${session.split('=')[0]}=${'A'.repeat(43)}`;
      const refused = await app.api('GET', '/api/persons?limit=1', undefined, { authorization: '', cookie: forged });
      assert.equal(refused.status, 401);
      assert.equal(
        refused.headers['ratelimit-policy'],
        (await app.api('GET', '/api/persons?limit=1', undefined, { authorization: '' })).headers['ratelimit-policy'],
      );
    });

    it('70 requests without credentials: 429 after the address bucket runs dry', async () => {
      const statuses: number[] = [];
      // A route of one token a request: a list's page costs a token per 100 items it asks for.
      for (let index = 0; index < 70; index++) statuses.push((await app.api('GET', '/api/persons?limit=1', undefined, { authorization: '' })).status);
      assert.equal(statuses[0], 401);
      assert.ok(statuses.includes(429), `statuses: ${statuses.join(',')}`);
      assert.ok(statuses.indexOf(429) >= 55, `429 only once the 60 are spent (first at ${statuses.indexOf(429)})`);
    });
  });
}

describe('an API token never shows after its creation: not in responses, the debug log or /metrics', () => {
  let dataDir: string;
  let service: Awaited<ReturnType<typeof startService>>;
  before(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'ms-tokens-'));
    service = await startService({ DATA_DIR: dataDir, LOG_LEVEL: 'debug', ADMIN_TOKEN }, await freePort());
  });
  after(async () => {
    await stopProcess(service.child);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('is used, refused, listed and revoked without appearing anywhere', async () => {
    const call = async (method: string, url: string, token: string, body?: unknown) => {
      const response = await fetch(service.base + url, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: response.status, text: await response.text() };
    };
    const created = await call('POST', '/api/tokens', ADMIN_TOKEN, { name: 'Secretive', scope: 'ingest' });
    const token = (JSON.parse(created.text) as { token: string }).token;
    const texts = [
      await call('POST', '/api/events', token, { type: 'fall.detected' }),
      await call('GET', '/api/persons', token),
      await call('GET', '/api/tokens', ADMIN_TOKEN),
      await call('GET', '/api/events?limit=100', ADMIN_TOKEN),
      await call('DELETE', '/api/tokens/secretive', ADMIN_TOKEN),
      await call('POST', '/api/events', token, { type: 'fall.cleared' }),
      await call('GET', '/metrics', ADMIN_TOKEN),
    ];
    assert.deepEqual(
      texts.map((response) => response.status),
      [202, 403, 200, 200, 204, 401, 200],
    );
    const secret = token.slice('mst_'.length);
    for (const response of texts) assert.ok(!response.text.includes(secret), response.text.slice(0, 200));
    const log = service.child.output();
    assert.ok(log.split('\n').length > 10, 'the debug log was written');
    assert.ok(!log.includes(secret), 'the token is not in the log');
  });
});
