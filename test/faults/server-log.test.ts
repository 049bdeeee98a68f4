import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import path from 'node:path';
import { signatureHeader } from '../../src/enrichment/signing.js';
import { eventually } from '../helpers/app.js';
import { freePort, startBroker } from '../helpers/broker.js';
import { startReceiver } from '../helpers/receiver.js';
import { startService, stopProcess } from '../helpers/process.js';

/** What whoever runs the service reads in its log when a broker goes away or a bot's signature fails. */
describe('the server log says why', () => {
  let dataDir: string;
  let service: Awaited<ReturnType<typeof startService>>;
  let broker: Awaited<ReturnType<typeof startBroker>>;
  let token: string;
  const api = (method: string, url: string, body?: unknown) =>
    fetch(service.base + url, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    }).then(async (response) => ({ status: response.status, body: await response.json().catch(() => null) }));
  const lines = () =>
    service.child
      .output()
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        // Anything but a JSON line is the process dying (Node's own report of an uncaught error): say what it printed.
        if (!line.startsWith('{')) assert.fail(`the service printed a line that is not JSON:\n${service.child.output().slice(-4000)}`);
        return JSON.parse(line) as { level: number; msg: string; reason?: string; bot_id?: string; ip?: string; timestamp?: string };
      });

  before(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'ms-log-'));
    broker = await startBroker();
    service = await startService(
      // Behind a proxy on loopback: X-Forwarded-For names the client (the admin-token test rotates it).
      {
        DATA_DIR: dataDir,
        LOG_LEVEL: 'info',
        TRUST_PROXY: 'loopback',
        MQTT_BACKOFF_INITIAL_MS: '100',
        MQTT_BACKOFF_MAX_MS: '200',
        MQTT_BIRTH_DELAY_MAX_MS: '0',
      },
      await freePort(),
    );
    token = readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim();
  });
  after(async () => {
    await stopProcess(service.child);
    await broker.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a broker connection that comes, is lost, fails while the broker is down (once, not per retry) and comes back', async () => {
    assert.equal((await api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url } })).status, 200);
    await eventually(async () => lines().some((line) => line.msg === 'MQTT connected'), 10_000, 'connected logged');
    await broker.stop('SIGKILL');
    await eventually(async () => lines().some((line) => line.msg.startsWith('MQTT connection lost')), 10_000, 'loss logged');
    // Several reconnect attempts (every 200 ms) fail against the stopped broker.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const failed = lines().filter((line) => line.msg.startsWith('MQTT connection failed'));
    assert.equal(failed.length, 1, JSON.stringify(failed));
    assert.match(failed[0]!.msg, /connection refused: is the broker running on that host and port\?/);
    assert.equal(failed[0]!.level, 40);
    await broker.start();
    await eventually(async () => lines().filter((line) => line.msg === 'MQTT connected').length === 2, 10_000, 'reconnect logged');
  });

  it('why a bot signature was refused, while the caller only sees the opaque 401', async () => {
    const bot = (await api('POST', '/api/bots', { name: 'Log Bot' })).body as { id: string; shared_secret: string };
    const send = async (secret: string, timestamp: number | string = Math.floor(Date.now() / 1000)) => {
      const body = JSON.stringify({ match_id: 'm1' });
      const parts = {
        method: 'POST',
        pathAndQuery: '/api/request-enrichment',
        timestamp: String(timestamp),
        nonce: `nonce-${Math.random().toString(36).slice(2)}-0123456789`,
        body,
      };
      const headers = {
        'content-type': 'application/json',
        'x-bot-id': bot.id,
        'x-bot-timestamp': parts.timestamp,
        'x-bot-nonce': parts.nonce,
        'x-bot-signature': signatureHeader(secret, parts),
      };
      const response = await fetch(`${service.base}/api/request-enrichment`, { method: 'POST', headers, body });
      return { status: response.status, body: (await response.json()) as { detail: string } };
    };
    const wrong = await send('mss_not-the-secret');
    const stale = await send(bot.shared_secret, Math.floor(Date.now() / 1000) - 1000);
    for (const answer of [wrong, stale]) {
      assert.equal(answer.status, 401);
      assert.equal(answer.body.detail, 'Missing or invalid credentials', 'the caller learns nothing');
    }
    await eventually(async () => lines().filter((line) => line.msg.startsWith('bot request refused')).length >= 2, 5000, 'refusals logged');
    const refusals = lines().filter((line) => line.msg.startsWith('bot request refused'));
    assert.deepEqual(
      refusals.map((line) => line.bot_id),
      [bot.id, bot.id],
    );
    assert.equal(refusals[0]!.reason, 'signature does not match');
    assert.equal(refusals[0]!.ip, '127.0.0.1', 'the address, which no other line at info carries');
    assert.equal(refusals[1]!.reason, 'timestamp more than 300 s from the server clock');
    assert.match(String(refusals[1]!.timestamp), /^\d+$/, 'the timestamp sent, beside the reason');
    assert.equal(service.child.output().includes(bot.shared_secret.slice(4)), false, 'no secret in the log');
    assert.equal(service.child.output().includes('not-the-secret'), false);

    // A flood of the same refusal is one line (the count follows when the minute ends), and at info
    // level no request is logged line by line (that is LOG_LEVEL=debug's access log).
    const answers = await Promise.all(Array.from({ length: 50 }, () => send('mss_not-the-secret')));
    assert.ok(answers.every((answer) => answer.status === 401));
    // A bot choosing its own timestamp text (signed, so the signature is valid) is still one reason.
    const chosen = await Promise.all(['uA', 'uB', 'ubC', 'x-1', 'x-2'].map((text) => send(bot.shared_secret, text)));
    assert.ok(chosen.every((answer) => answer.status === 401));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(lines().filter((line) => line.reason === 'signature does not match').length, 1);
    assert.equal(lines().filter((line) => line.reason?.startsWith('timestamp')).length, 1);
    assert.equal(
      lines().some((line) => line.msg === 'incoming request' || line.msg === 'request completed'),
      false,
    );
  });

  it('a wrong admin token, as a bearer token or at sign-in, is logged with the address, once a minute per client (an IPv6 client by its /64)', async () => {
    for (let i = 0; i < 3; i++) {
      const guess = await fetch(`${service.base}/api/persons`, {
        headers: { authorization: `Bearer guess-${i}-0123456789abcdef`, 'x-forwarded-for': `2001:db8:1:2::${i + 1}` },
      });
      assert.equal(guess.status, 401);
    }
    const signIn = await fetch(`${service.base}/api/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: 'not-the-admin-token-0123456789' }),
    });
    assert.equal(signIn.status, 401);
    await eventually(async () => lines().some((line) => line.msg === 'sign-in refused: wrong admin token'), 5000, 'sign-in refusal logged');
    const refused = lines().filter((line) => /^(bearer token|sign-in) refused/.test(line.msg));
    assert.deepEqual(
      refused.map((line) => [line.msg, line.ip]),
      [
        ['bearer token refused: neither the admin token nor a live API token (unknown or revoked)', '2001:db8:1:2::1'],
        ['sign-in refused: wrong admin token', '127.0.0.1'],
      ],
    );
    assert.equal(/guess-\d|not-the-admin-token/.test(service.child.output()), false, 'no token in the log');
  });

  it('a webhook receiver that fails every delivery: a line when retries start, not one per failed attempt', async () => {
    const receiver = await startReceiver(500);
    try {
      assert.equal((await api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
      for (let i = 0; i < 20; i++) assert.equal((await api('POST', '/api/events', { type: 'anomaly.detected', severity: 'info', detail: { i } })).status, 202);
      await eventually(() => receiver.received.length >= 20, 15_000, 'every first attempt made');
      await eventually(() => lines().some((line) => line.msg === 'webhook attempt failed; retry scheduled'), 5000, 'the failure logged');
      assert.equal(lines().filter((line) => line.msg === 'webhook attempt failed; retry scheduled').length, 1);
    } finally {
      await api('POST', '/api/settings/integration', { webhook: { enabled: false } });
      await receiver.close();
    }
  });

  it('a client leaving in the middle of a download is no line at info (it is in the access log at debug)', async () => {
    for (let i = 0; i < 5; i++) {
      const socket = connect(Number(new URL(service.base).port), '127.0.0.1');
      socket.write('GET /docs/static/swagger-ui-bundle.js HTTP/1.1\r\nHost: localhost\r\n\r\n');
      await new Promise<void>((resolve) => socket.once('data', () => resolve(socket.resetAndDestroy() && undefined)));
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(
      lines().filter((line) => line.msg === 'stream closed prematurely'),
      [],
    );
  });
});
