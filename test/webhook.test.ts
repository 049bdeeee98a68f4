import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { outcomeOf } from '../src/webhook/policy.js';
import { isForbiddenAddress, normalizedHost } from '../src/outbound.js';
import { DIALECTS, createTestEnv, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { startReceiver } from './helpers/receiver.js';

const FAST = { WEBHOOK_RETRY_DELAY_MS: '300', WEBHOOK_TIMEOUT_MS: '400' };

describe('webhook retry policy', () => {
  it('retries 5xx, timeouts and connection failures once; never 4xx or 3xx', () => {
    assert.equal(outcomeOf({ statusCode: 200, error: null }, 1), 'delivered');
    assert.equal(outcomeOf({ statusCode: 204, error: null }, 2), 'delivered');
    assert.equal(outcomeOf({ statusCode: 500, error: 'HTTP 500' }, 1), 'retry');
    assert.equal(outcomeOf({ statusCode: 503, error: 'HTTP 503' }, 2), 'failed');
    assert.equal(outcomeOf({ statusCode: null, error: 'timed out' }, 1), 'retry');
    assert.equal(outcomeOf({ statusCode: null, error: 'connection refused' }, 2), 'failed');
    assert.equal(outcomeOf({ statusCode: 404, error: 'HTTP 404' }, 1), 'failed');
    assert.equal(outcomeOf({ statusCode: 302, error: null }, 1), 'failed');
  });

  it('refuses link-local, unspecified and multicast targets in every address form, and allows loopback and LAN', () => {
    const forbidden = [
      '169.254.169.254', '::ffff:169.254.1.1', '::ffff:a9fe:a9fe', '0:0:0:0:0:ffff:a9fe:a9fe', '64:ff9b::a9fe:a9fe', '::a9fe:a9fe', '::169.254.169.254',
      'fe80::1', 'FE80::abcd', '0.0.0.0', '::', '::ffff:0.0.0.0', '224.0.0.1', 'ff02::1', '100.100.100.200', 'fd00:ec2::254',
    ];
    for (const address of forbidden) assert.equal(isForbiddenAddress(address), true, address);
    for (const address of ['127.0.0.1', '192.168.1.10', '10.0.0.2', '::1', '::ffff:127.0.0.1', 'fd00::1', '100.64.0.1', 'homeassistant.local']) assert.equal(isForbiddenAddress(address), false, address);
  });

  it('reads a URL host the way the resolver will connect it', () => {
    for (const url of ['mqtt://0xa9fea9fe:1883', 'mqtt://169.254.43518:1883', 'mqtt://2852039166:1883', 'http://0251.0376.0251.0376/', 'ws://[::ffff:169.254.169.254]:9001', 'mqtt://[0:0:0:0:0:ffff:a9fe:a9fe]:1883']) {
      assert.equal(isForbiddenAddress(normalizedHost(new URL(url))!), true, url);
    }
    assert.equal(normalizedHost(new URL('mqtt://Broker.LAN:1883')), 'broker.lan');
    assert.equal(normalizedHost(new URL('mqtt://169.254.169.254%00:1883')), null, 'no host a resolver could be given');
  });
});

for (const dialect of DIALECTS) {
  describe(`system webhook (${dialect})`, () => {
    let app: TestApp;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let secret: string;

    before(async () => {
      receiver = await startReceiver();
      app = await startTestApp(dialect, FAST, { start: true });
      secret = (await app.api('POST', '/api/settings/integration/webhook-secret')).body.secret;
      assert.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/);
      const saved = await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } });
      assert.equal(saved.status, 200);
      assert.equal(saved.body.webhook.secret_set, true);
    });
    after(async () => {
      await app.cleanup();
      await receiver.close();
    });
    beforeEach(() => {
      receiver.received.length = 0;
    });

    /** The log of one event type, oldest first, once no attempt is pending or in flight. */
    const deliveriesOf = (eventType: string) =>
      eventually(async () => {
        const rows = ((await app.api('GET', '/api/webhook/deliveries?limit=500')).body as { event_type: string; state: string }[]).filter((row) => row.event_type === eventType).reverse();
        return rows.every((row) => row.state !== 'pending' && row.state !== 'sending') ? rows : null;
      }, 3000, `settled ${eventType} deliveries`);

    it('delivers every event once, signed and verifiable with standardwebhooks', async () => {
      await app.api('POST', '/api/zones', { id: 'hall', name: 'Hall' });
      await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
      await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada', zone: 'hall', blob_id: 'b1' });
      await eventually(() => receiver.received.length >= 4, 5000, '4 deliveries');
      await new Promise((resolve) => setTimeout(resolve, 100));
      const types = receiver.received.map((request) => request.headers['x-service-event']);
      assert.deepEqual(types.sort(), ['person.created', 'presence.changed', 'zone.created', 'zone.entry']);
      const verifier = new Webhook(secret);
      for (const request of receiver.received) {
        const payload = verifier.verify(request.body, request.headers as Record<string, string>) as Record<string, unknown>;
        assert.equal(payload.event_type, request.headers['x-service-event']);
        assert.deepEqual(Object.keys(payload).sort(), ['blob_id', 'detail', 'event_type', 'person', 'severity', 'timestamp', 'zone']);
        assert.equal(request.headers['content-type'], 'application/json');
        assert.match(String(request.headers['user-agent']), /^mothership\/\d+\.\d+\.\d+$/);
        assert.match(String(request.headers['webhook-id']), /^msg_[0-9a-f]{32}$/);
      }
      const entry = JSON.parse(receiver.received.find((request) => request.headers['x-service-event'] === 'zone.entry')!.body);
      assert.equal(entry.blob_id, 'b1');
      assert.equal(entry.zone, 'hall');
      assert.throws(() => new Webhook('whsec_' + Buffer.alloc(32, 1).toString('base64')).verify(receiver.received[0]!.body, receiver.received[0]!.headers as Record<string, string>));
    });

    it('retries a 5xx once, after the retry delay, with the same webhook-id', async () => {
      receiver.answerNext(500, 200);
      await app.api('PUT', '/api/system/mode', { mode: 'away' });
      await eventually(() => receiver.received.length === 2, 5000, 'retry');
      const [first, second] = receiver.received;
      assert.equal(first!.headers['webhook-id'], second!.headers['webhook-id']);
      assert.equal(first!.body, second!.body);
      assert.ok(second!.at - first!.at >= 280, `retry after ${second!.at - first!.at} ms`);
      const log = await deliveriesOf('system.mode_changed');
      assert.deepEqual(log.map((row: any) => [row.attempt, row.state, row.status_code]), [[1, 'retry_scheduled', 500], [2, 'delivered', 200]]);
    });

    it('gives up after the second failure', async () => {
      receiver.answerNext(502, 503);
      await app.api('PUT', '/api/system/mode', { mode: 'sleep' });
      await eventually(() => receiver.received.length === 2, 5000, 'two attempts');
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(receiver.received.length, 2);
      const log = (await deliveriesOf('system.mode_changed')).slice(-2);
      assert.deepEqual(log.map((row: any) => [row.attempt, row.state]), [[1, 'retry_scheduled'], [2, 'failed']]);
    });

    it('does not retry a 4xx or follow a redirect', async () => {
      receiver.answerNext(404);
      await app.api('PUT', '/api/system/mode', { mode: 'vacation' });
      receiver.answerNext((response) => {
        response.writeHead(302, { location: receiver.url + '/elsewhere' });
        response.end();
      });
      await app.api('PUT', '/api/system/mode', { mode: 'home' });
      await new Promise((resolve) => setTimeout(resolve, 800));
      assert.equal(receiver.received.length, 2);
      assert.ok(receiver.received.every((request) => !request.headers['x-forwarded-for']));
      const log = (await deliveriesOf('system.mode_changed')).slice(-2);
      assert.deepEqual(log.map((row: any) => [row.attempt, row.state, row.status_code]), [[1, 'failed', 404], [1, 'failed', 302]]);
    });

    it('retries after a timeout', async () => {
      receiver.answerNext('hang', 200);
      await app.api('POST', '/api/events', { type: 'fall.detected', person: 'ada' });
      await eventually(() => receiver.received.length === 2, 5000, 'retry after timeout');
      const log = await deliveriesOf('fall.detected');
      assert.deepEqual(log.map((row: any) => [row.attempt, row.state]), [[1, 'retry_scheduled'], [2, 'delivered']]);
      assert.match((log[0] as any).error, /timed out after 400 ms/);
    });

    it('redelivers a logged delivery on request', async () => {
      const [last] = (await app.api('GET', '/api/webhook/deliveries?limit=1')).body;
      const redelivered = await app.api('POST', `/api/webhook/deliveries/${last.id}/redeliver`);
      assert.equal(redelivered.status, 202);
      assert.equal(redelivered.body.webhook_id, last.webhook_id);
      await eventually(() => receiver.received.length === 1, 5000, 'redelivery');
      assert.equal(receiver.received[0]!.headers['webhook-id'], last.webhook_id);
      assert.equal((await app.api('POST', '/api/webhook/deliveries/999999/redeliver')).status, 404);
    });

    it('reports the last delivery in the settings status', async () => {
      const status = (await app.api('GET', '/api/settings/integration')).body.webhook.status;
      assert.equal(status.last_status_code, 200);
      assert.ok(status.last_delivery_at);
    });

    it('sends a test delivery once, even when the dispatcher runs while it is in flight', async () => {
      const slow = await startReceiver((response) => setTimeout(() => response.writeHead(204).end(), 300));
      try {
        const tested = app.api('POST', '/api/settings/integration/test', { target: 'webhook', webhook: { url: slow.url } });
        await new Promise((resolve) => setTimeout(resolve, 100));
        // An event with a delivery wakes the dispatcher, which reclaims `sending` rows past their deadline.
        assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { during: 'test delivery' } })).status, 202);
        assert.equal((await tested).body.webhook.ok, true);
        await new Promise((resolve) => setTimeout(resolve, 400));
        assert.equal(slow.received.length, 1);
      } finally {
        await slow.close();
      }
    });

    it('tests candidate settings with a real webhook.test delivery, without saving them', async () => {
      const other = await startReceiver(204);
      try {
        const result = await app.api('POST', '/api/settings/integration/test', { target: 'webhook', webhook: { url: other.url } });
        assert.equal(result.status, 200);
        assert.equal(result.body.webhook.ok, true);
        assert.equal(result.body.webhook.status_code, 204);
        assert.equal(result.body.mqtt, undefined);
        assert.equal(other.received.length, 1);
        assert.equal(other.received[0]!.headers['x-service-event'], 'webhook.test');
        new Webhook(secret).verify(other.received[0]!.body, other.received[0]!.headers as Record<string, string>);
        assert.equal((await app.api('GET', '/api/settings/integration')).body.webhook.url, receiver.url, 'not saved');
        const refused = await app.api('POST', '/api/settings/integration/test', { target: 'webhook', webhook: { url: 'http://127.0.0.1:1/' } });
        assert.equal(refused.body.webhook.ok, false);
        assert.equal(refused.body.webhook.error, 'no HTTP server answered at that URL', 'socket details only for the saved URL');
        const metadata = await app.api('POST', '/api/settings/integration/test', { target: 'webhook', webhook: { url: 'http://169.254.169.254/latest/meta-data' } });
        assert.equal(metadata.status, 400);
        assert.deepEqual(metadata.body.errors.map((error: { path: string }) => error.path), ['/webhook/url']);
      } finally {
        await other.close();
      }
    });

    it('sends nothing while disabled', async () => {
      await app.api('POST', '/api/settings/integration', { webhook: { enabled: false } });
      await app.api('PUT', '/api/system/mode', { mode: 'away' });
      await new Promise((resolve) => setTimeout(resolve, 400));
      assert.equal(receiver.received.length, 0);
      await app.api('POST', '/api/settings/integration', { webhook: { enabled: true } });
    });
  });
}

describe('webhook retry across a restart', () => {
  it('sends a pending retry after the service restarts', async () => {
    const receiver = await startReceiver();
    const env = await createTestEnv('sqlite', { WEBHOOK_RETRY_DELAY_MS: '1500', WEBHOOK_TIMEOUT_MS: '400' });
    try {
      const first = await startTestApp('sqlite', {}, { testEnv: env, start: true });
      await first.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } });
      receiver.answerNext(500);
      await first.api('POST', '/api/zones', { id: 'den', name: 'Den' });
      await eventually(() => receiver.received.length === 1, 5000, 'first attempt');
      await eventually(async () => (await first.api('GET', '/api/webhook/deliveries')).body.some((row: { attempt: number }) => row.attempt === 2), 2000, 'retry scheduled');
      await first.close();

      const second = await startTestApp('sqlite', {}, { testEnv: env, start: true });
      try {
        await eventually(() => receiver.received.length === 2, 5000, 'retry after restart');
        assert.equal(receiver.received[1]!.headers['webhook-id'], receiver.received[0]!.headers['webhook-id']);
        const states = async () => (await second.api('GET', '/api/webhook/deliveries')).body.reverse().map((row: { attempt: number; state: string }) => [row.attempt, row.state]);
        await eventually(async () => JSON.stringify(await states()) === JSON.stringify([[1, 'retry_scheduled'], [2, 'delivered']]), 3000, `log ${JSON.stringify(await states())}`);
      } finally {
        await second.close();
      }
    } finally {
      await env.cleanup();
      await receiver.close();
    }
  });

  it('connection refused is retried once, then failed', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const app = await startTestApp('sqlite', FAST, { start: true });
    try {
      await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: `http://127.0.0.1:${port}/` } });
      await app.api('POST', '/api/zones', { id: 'den', name: 'Den' });
      const log = await eventually(async () => {
        const rows = (await app.api('GET', '/api/webhook/deliveries')).body;
        return rows.length === 2 && rows[0].state === 'failed' ? rows.reverse() : null;
      }, 5000, 'two failed attempts');
      assert.deepEqual(log.map((row: { error: string }) => row.error), ['connection refused', 'connection refused']);
    } finally {
      await app.cleanup();
    }
  });
});
