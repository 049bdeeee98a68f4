import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ADMIN_TOKEN, createTestEnv, eventually, startTestApp, type TestApp, type TestEnv } from '../helpers/app.js';
import { spawnMothership, stopProcess } from '../helpers/process.js';
import { startReceiver } from '../helpers/receiver.js';
import { freePort, startBroker } from '../helpers/broker.js';

describe('admin authentication covers every route', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp('sqlite');
  });
  after(() => app.cleanup());

  it('every /api/ route in the OpenAPI document refuses a request without the token', async () => {
    const openapi = (await app.api('GET', '/openapi.json', undefined, { authorization: '' })).body;
    const open = new Set(['POST /api/session', 'DELETE /api/session', 'POST /api/request-enrichment', 'GET /api/matches/{id}/enrichment']);
    let checked = 0;
    for (const [path, methods] of Object.entries(openapi.paths as Record<string, Record<string, unknown>>)) {
      if (!path.startsWith('/api/')) continue;
      for (const method of Object.keys(methods)) {
        const route = `${method.toUpperCase()} ${path}`;
        if (open.has(route)) continue;
        const url = path.replace(/\{[^}]+\}/g, '1');
        const response = await app.api(method.toUpperCase(), url, ['post', 'put', 'patch'].includes(method) ? {} : undefined, { authorization: '' });
        assert.equal(response.status, 401, `${route} answered ${response.status}`);
        assert.equal(response.body.code, 'unauthorized', route);
        checked++;
      }
    }
    assert.ok(checked >= 35, `only ${checked} admin routes found`);
    // The bot-signed routes refuse unsigned requests too.
    assert.equal((await app.api('POST', '/api/request-enrichment', { match_id: 'x' }, { authorization: '' })).status, 401);
    assert.equal((await app.api('GET', '/api/matches/x/enrichment', undefined, { authorization: '' })).status, 401);
  });
});

describe('brute force of the admin token', () => {
  it('is rate limited: sign-in attempts cost 10 tokens of a 60-token bucket', async () => {
    const app = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '60', RATE_LIMIT_REFILL_PER_SEC: '1' });
    try {
      const statuses: number[] = [];
      for (let attempt = 0; attempt < 8; attempt++)
        statuses.push((await app.api('POST', '/api/session', { token: `guess-${attempt}` }, { authorization: '' })).status);
      assert.deepEqual(statuses, [401, 401, 401, 401, 401, 401, 429, 429]);
      const limited = await app.api('POST', '/api/session', { token: ADMIN_TOKEN }, { authorization: '' });
      assert.equal(limited.status, 429, 'even the right token waits: the bucket is empty');
      assert.ok(Number(limited.headers['retry-after']) >= 1);
    } finally {
      await app.cleanup();
    }
  });
});

describe('secrets never reach the logs or responses', () => {
  let env: TestEnv;
  before(async () => {
    env = await createTestEnv('sqlite', { LOG_LEVEL: 'trace' });
  });
  after(() => env.cleanup());

  it('a service logging at trace level prints none of the secrets it handled', async () => {
    const receiver = await startReceiver();
    const broker = await startBroker();
    const port = await freePort();
    const service = spawnMothership(['serve'], { ...env.env, LOG_LEVEL: 'trace', PORT: String(port), RATE_LIMIT_CAPACITY: '100000' });
    const base = `http://127.0.0.1:${port}`;
    const secrets: string[] = [ADMIN_TOKEN];
    const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = { authorization: `Bearer ${ADMIN_TOKEN}` }) => {
      const response = await fetch(base + path, {
        method,
        headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await response.text();
      return { status: response.status, text, json: text ? JSON.parse(text) : null };
    };
    try {
      await eventually(async () => (await fetch(base + '/healthz').catch(() => null))?.ok, 10_000, 'service up');
      const mqttPassword = `mqtt-pass-${randomBytes(6).toString('hex')}`;
      secrets.push(mqttPassword);
      const webhookSecret = 'whsec_' + randomBytes(32).toString('base64');
      secrets.push(webhookSecret);
      const saved = await call('POST', '/api/settings/integration', {
        mqtt: { enabled: true, broker_url: broker.url, username: 'hub', password: mqttPassword, topic_root: `root${randomBytes(3).toString('hex')}` },
        webhook: { enabled: true, url: receiver.url, secret: webhookSecret },
      });
      assert.equal(saved.status, 200);
      const bot = (await call('POST', '/api/bots', { name: 'Log Bot' })).json;
      secrets.push(bot.shared_secret);
      await call('POST', '/api/matches', { id: 'm1', status: 'completed', replay: { players: [{ id: 'a', name: 'A' }] } });
      const session = await call('POST', '/api/session', { token: ADMIN_TOKEN }, {});
      assert.equal(session.status, 204);
      // A dashboard user's password: at creation, a new one, a sign-in and a wrong guess.
      const password = `pw-${randomBytes(6).toString('hex')}`;
      secrets.push(password, `${password}-new`, `${password}-guess`);
      assert.equal((await call('POST', '/api/users', { username: 'kim', role: 'household', password })).status, 201);
      assert.equal((await call('PATCH', '/api/users/kim', { password: `${password}-new` })).status, 200);
      assert.equal((await call('POST', '/api/session', { username: 'kim', password: `${password}-new` }, {})).status, 204);
      assert.equal((await call('POST', '/api/session', { username: 'kim', password: `${password}-guess` }, {})).status, 401);
      const generated = (await call('POST', '/api/settings/integration/webhook-secret')).json.secret;
      secrets.push(generated);
      await call('POST', '/api/settings/integration/test', { target: 'all', mqtt: { password: 'wrong-password-value' } });
      secrets.push('wrong-password-value');
      // A bot-signed request, and failing ones.
      const { signatureHeader } = await import('../../src/enrichment/signing.js');
      const body = JSON.stringify({ match_id: 'm1' });
      const timestamp = String(Math.floor(Date.now() / 1000));
      const nonce = randomBytes(16).toString('hex');
      const signature = signatureHeader(bot.shared_secret, { method: 'POST', pathAndQuery: '/api/request-enrichment', timestamp, nonce, body });
      const signed = await fetch(base + '/api/request-enrichment', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-bot-id': bot.id, 'x-bot-timestamp': timestamp, 'x-bot-nonce': nonce, 'x-bot-signature': signature },
        body,
      });
      assert.equal(signed.status, 202);
      await call('GET', '/api/persons', undefined, { authorization: 'Bearer wrong-token-but-logged?' });
      await eventually(() => receiver.received.length > 0, 5000, 'a webhook delivery');
      // Every response the API gave about settings hides the secrets.
      const view = await call('GET', '/api/settings/integration');
      for (const secret of secrets) assert.equal(view.text.includes(secret), false, 'settings view leaks a secret');
    } finally {
      await stopProcess(service);
      await receiver.close();
      await broker.destroy();
    }
    const logs = service.output();
    assert.ok(logs.split('\n').length > 20, 'the service logged at trace level');
    for (const secret of secrets) assert.equal(logs.includes(secret), false, `a secret (${secret.slice(0, 6)}...) appears in the logs`);
    assert.match(logs, /"msg":"incoming request"/, 'requests were logged');
  });
});
