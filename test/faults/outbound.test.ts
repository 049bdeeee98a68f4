import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { putSetting } from '../../src/db/kv.js';
import { DEFAULT_SETTINGS, storedSecretError, type IntegrationSettings } from '../../src/settings/index.js';
import { DIALECTS, eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { freePort, startBroker } from '../helpers/broker.js';

/** A TCP listener standing in for a host an attacker controls: it records every byte sent to it. */
async function attackerListener() {
  const received: Buffer[] = [];
  let connections = 0;
  const server: Server = createServer((socket) => {
    connections++;
    socket.on('data', (chunk) => received.push(chunk));
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `mqtt://127.0.0.1:${port}`,
    connections: () => connections,
    bytes: () => Buffer.concat(received),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const paths = (body: { errors?: { path: string }[] }) => (body.errors ?? []).map((error) => error.path);

describe('the stored MQTT password is bound to the broker it was saved for', () => {
  const base: IntegrationSettings['mqtt'] = { ...DEFAULT_SETTINGS.mqtt, broker_url: 'mqtts://broker.lan:8883', username: 'hub', password: 'stored' };
  const check = (change: Partial<IntegrationSettings['mqtt']>, patch: Record<string, unknown> = change) =>
    storedSecretError('password', base, { ...base, ...change }, patch)?.path ?? null;

  it('asks for the password again when the endpoint moves or TLS gets weaker', () => {
    assert.equal(check({ broker_url: 'mqtts://attacker.example:8883' }), '/mqtt/password', 'other host');
    assert.equal(check({ broker_url: 'mqtts://broker.lan:8884' }), '/mqtt/password', 'other port');
    assert.equal(check({ broker_url: 'mqtt://broker.lan:8883' }), '/mqtt/password', 'TLS switched off');
    assert.equal(check({ broker_url: 'wss://broker.lan:8883' }), '/mqtt/password', 'other transport');
    assert.equal(check({ tls_insecure: true }), '/mqtt/password', 'certificate verification switched off');
    assert.equal(check({ ca_cert: '-----BEGIN CERTIFICATE-----x-----END CERTIFICATE-----' }), '/mqtt/password', 'another CA trusted');
    // TLS by the flag on an mqtt:// URL counts the same as mqtts://.
    const flagged = { ...base, broker_url: 'mqtt://broker.lan:8883', tls: true };
    assert.equal(storedSecretError('password', flagged, { ...flagged, tls: false }, { tls: false })?.path, '/mqtt/password', 'TLS flag switched off');
    assert.equal(
      storedSecretError('password', flagged, { ...flagged, broker_url: 'mqtts://broker.lan:8883' }, { broker_url: 'mqtts://broker.lan:8883' }),
      null,
      'the same connection spelled mqtts://',
    );
  });

  it('keeps it for the same broker, a re-entered password, or no password at all', () => {
    assert.equal(check({}), null);
    assert.equal(check({ broker_url: 'mqtts://BROKER.lan:8883' }), null, 'host names are case-insensitive');
    assert.equal(check({ username: 'other', topic_root: 'x' }), null);
    assert.equal(check({ broker_url: 'mqtts://attacker.example:8883', password: 'typed' }), null, 'a typed password goes where the user says');
    assert.equal(check({ broker_url: 'mqtts://attacker.example:8883', password: '' }, { broker_url: 'x', password: null }), null, 'cleared');
    assert.equal(
      check({ broker_url: 'mqtts://attacker.example:8883', password: 'stored' }, { broker_url: 'x', password: 'stored' }),
      null,
      'sent again by the user',
    );
  });

  it('end to end: neither a test nor a save sends the stored password to another host', async () => {
    const broker = await startBroker({ users: { hub: 's3cret-pass' } });
    const attacker = await attackerListener();
    const app = await startTestApp('sqlite');
    try {
      const saved = await app.api('POST', '/api/settings/integration', {
        mqtt: { enabled: false, broker_url: broker.url, username: 'hub', password: 's3cret-pass' },
      });
      assert.equal(saved.status, 200);
      for (const mqtt of [{ broker_url: attacker.url }, { broker_url: `mqtt://localhost:${broker.port}` }]) {
        const test = await app.api('POST', '/api/settings/integration/test', { target: 'mqtt', mqtt });
        assert.equal(test.status, 400, JSON.stringify(mqtt));
        assert.deepEqual(paths(test.body), ['/mqtt/password']);
        const save = await app.api('POST', '/api/settings/integration', { mqtt });
        assert.equal(save.status, 400);
        assert.deepEqual(paths(save.body), ['/mqtt/password']);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(attacker.connections(), 0, 'nothing was sent to the other host');
      assert.equal((await app.api('GET', '/api/settings/integration')).body.mqtt.broker_url, broker.url, 'the refused save changed nothing');

      // The saved broker still gets it, and a password typed for another host goes there.
      assert.equal((await app.api('POST', '/api/settings/integration/test', { target: 'mqtt' })).body.mqtt.ok, true);
      const typed = await app.api('POST', '/api/settings/integration/test', { target: 'mqtt', mqtt: { broker_url: attacker.url, password: 'typed-here' } });
      assert.equal(typed.status, 200);
      assert.equal(attacker.bytes().includes('s3cret-pass'), false);
      assert.equal(attacker.bytes().includes('typed-here'), true);
    } finally {
      await app.cleanup();
      await attacker.close();
      await broker.destroy();
    }
  });
});

for (const dialect of DIALECTS) {
  describe(`outbound address policy (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, { MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '200', WEBHOOK_RETRY_DELAY_MS: '100' }, { start: true });
    });
    after(() => app.cleanup());

    it('refuses to save or test a URL that points at link-local, unspecified or multicast space, in any address form', async () => {
      const webhookUrls = [
        'http://169.254.169.254/hook',
        'http://[::ffff:169.254.169.254]/',
        'http://[0:0:0:0:0:ffff:a9fe:a9fe]/',
        'http://0xa9fea9fe/',
        'http://0/',
        'http://[fe80::1]/',
        'https://[64:ff9b::a9fe:a9fe]/',
      ];
      for (const url of webhookUrls) {
        for (const route of ['/api/settings/integration', '/api/settings/integration/test']) {
          const response = await app.api('POST', route, { ...(route.endsWith('test') ? { target: 'webhook' } : {}), webhook: { url } });
          assert.equal(response.status, 400, `${route} ${url}`);
          assert.deepEqual(paths(response.body), ['/webhook/url'], url);
        }
      }
      const brokerUrls = [
        'mqtt://169.254.169.254%00:1883',
        'mqtt://%31%36%39.254.169.254:1883',
        'mqtt://169.254.169.254:1883',
        'mqtt://0xa9fea9fe:1883',
        'mqtt://169.254.43518:1883',
        'mqtts://[::ffff:a9fe:a9fe]:8883',
        'ws://[fe80::1]:9001',
        'wss://0.0.0.0:443',
        'mqtt://224.0.0.1:1883',
      ];
      for (const url of brokerUrls) {
        const response = await app.api('POST', '/api/settings/integration', { mqtt: { broker_url: url } });
        assert.equal(response.status, 400, url);
        assert.deepEqual(paths(response.body), ['/mqtt/broker_url'], url);
      }
      assert.equal(
        (
          await app.api('POST', '/api/settings/integration', {
            mqtt: { broker_url: 'mqtt://192.168.1.10:1883' },
            webhook: { url: 'http://127.0.0.1:1880/hook' },
          })
        ).status,
        200,
        'LAN and loopback stay allowed',
      );
    });

    it('a URL stored before the policy is refused when connecting, not delivered to', async () => {
      await putSetting(app.database.db, 'integration', {
        mqtt: { ...DEFAULT_SETTINGS.mqtt, enabled: true, broker_url: 'mqtt://[::ffff:169.254.169.254]:1883', password_sealed: '', ca_cert_sealed: '' },
        webhook: { enabled: true, url: 'http://[::ffff:a9fe:a9fe]/hook', secret_sealed: '' },
      });
      await app.mqtt.configure(
        (
          await eventually(
            async () => {
              const settings = await app.settings.get();
              return settings.webhook.enabled ? settings : null;
            },
            4000,
            'stored settings read',
          )
        ).mqtt,
      );
      await app.api('PUT', '/api/system/mode', { mode: 'away' });
      const delivery = await eventually(
        async () => (await app.api('GET', '/api/webhook/deliveries')).body.find((item: { state: string }) => item.state === 'failed'),
        4000,
        'delivery failed',
      );
      assert.match(delivery.error, /may not reach/);
      const status = await eventually(async () => (await app.api('GET', '/api/settings/integration')).body.mqtt.status.last_error, 4000, 'MQTT error');
      assert.match(status, /may not reach/);
      await putSetting(app.database.db, 'integration', {});
    });
  });
}

describe('settings tests do not scan ports for a caller', () => {
  it('socket-level reasons are told only for the saved target', async () => {
    const app = await startTestApp('sqlite');
    const closed = await freePort();
    try {
      const mqttOther = await app.api('POST', '/api/settings/integration/test', { target: 'mqtt', mqtt: { broker_url: `mqtt://127.0.0.1:${closed}` } });
      assert.equal(mqttOther.body.mqtt.error, 'no MQTT broker answered at that host and port');
      const webhookOther = await app.api('POST', '/api/settings/integration/test', { target: 'webhook', webhook: { url: `http://127.0.0.1:${closed}/` } });
      assert.equal(webhookOther.body.webhook.error, 'no HTTP server answered at that URL');
      const nothing = await app.api('POST', '/api/settings/integration/test', { target: 'mqtt', mqtt: { broker_url: 'mqtt://no-such-host.invalid:1883' } });
      assert.equal(nothing.body.mqtt.error, 'host not found', 'a name that does not resolve is said as such');

      await app.api('POST', '/api/settings/integration', {
        mqtt: { broker_url: `mqtt://127.0.0.1:${closed}` },
        webhook: { url: `http://127.0.0.1:${closed}/` },
      });
      const mqttSaved = await app.api('POST', '/api/settings/integration/test', { target: 'mqtt' });
      assert.match(mqttSaved.body.mqtt.error, /^connection refused/);
      const webhookSaved = await app.api('POST', '/api/settings/integration/test', { target: 'webhook' });
      assert.equal(webhookSaved.body.webhook.error, 'connection refused');
    } finally {
      await app.cleanup();
    }
  });
});
